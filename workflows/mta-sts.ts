import { proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import type { RefreshResult } from '../core/mta-sts/refresh.js';
import { UNLIMITED_RETRY } from './activity-options.js';

// Sized to the fetch: MTA_STS_TIMEOUT_MS is at most 2 minutes, DNS and the row write take seconds. A failed
// fetch is recorded, not thrown; what is thrown (the database) is retried without a count limit.
const acts = proxyActivities<Activities>({ startToCloseTimeout: '3 minutes', retry: UNLIMITED_RETRY });

export type MtaStsFetchInput = { domain: string };

/**
 * Fetches a recipient domain's MTA-STS policy and records it (`mta-sts-<domain>`, started by the
 * transport's lookup when the record's id is new or the stored answer expired; docs/mta-sts.md).
 * Idempotent: a second run records the same outcome.
 */
export async function mtaStsFetchWorkflow(input: MtaStsFetchInput): Promise<RefreshResult> {
  return acts.refreshMtaStsPolicy(input);
}
