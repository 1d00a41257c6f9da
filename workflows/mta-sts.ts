import { defineSignal, proxyActivities, setHandler } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import type { RefreshResult } from '../core/mta-sts/refresh.js';
import { UNLIMITED_RETRY } from './activity-options.js';

// Sized to the fetch: MTA_STS_TIMEOUT_MS is at most 2 minutes, DNS and the row write take seconds. A failed
// fetch is recorded, not thrown; what is thrown (the database) is retried without a count limit.
const acts = proxyActivities<Activities>({ startToCloseTimeout: '3 minutes', retry: UNLIMITED_RETRY });

export type MtaStsFetchInput = { domain: string };

/**
 * "Look again": sent with every start (signal-with-start). A run already under way when a record's id
 * changes reads the record once more after its fetch, so a change that arrives while a run finishes is not
 * missed until the lookup asks again.
 */
export const mtaStsRecheckSignal = defineSignal('mtaStsRecheck');
/** Fetches one run makes at most: a record that keeps changing cannot keep a run alive. */
const MAX_FETCHES = 5;

/**
 * Fetches a recipient domain's MTA-STS policy and records it (`mta-sts-<domain>`, started by the
 * transport's lookup when the record's id is new or the stored answer expired; docs/mta-sts.md).
 * Idempotent: a second run records the same outcome.
 */
export async function mtaStsFetchWorkflow(input: MtaStsFetchInput): Promise<RefreshResult> {
  let again: boolean;
  setHandler(mtaStsRecheckSignal, () => {
    again = true;
  });
  let result: RefreshResult;
  let fetches = 0;
  do {
    // The signal that came with the start is answered by this fetch; one that comes during it asks for another.
    again = false;
    result = await acts.refreshMtaStsPolicy(input);
    fetches += 1;
  } while (again && fetches < MAX_FETCHES);
  return result;
}
