import {
  condition,
  continueAsNew,
  defineSignal,
  proxyActivities,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import { HEARTBEAT_TIMEOUT, UNLIMITED_RETRY } from './activity-options.js';

const { dispatchEngagementBatch } = proxyActivities<Activities>({
  // A batch is time-boxed to a minute of POSTs (15 s each at most), plus its database work.
  startToCloseTimeout: '3 minutes',
  heartbeatTimeout: HEARTBEAT_TIMEOUT,
  retry: UNLIMITED_RETRY,
});

/** More events were recorded for this endpoint (sent with signal-with-start); any number of nudges is one flag. */
export const moreEventsSignal = defineSignal('moreEventsSignal');

/** Rounds per run before continue-as-new, whatever the server suggests, so a busy domain's history stays small. */
const ROUNDS_PER_RUN = 200;

/**
 * The one dispatcher of a domain (`engagement-<dom id>`): drains its pending engagement events in
 * claimed batches (one POST per event), lingering a few seconds for more before it ends, so a burst of
 * events shares one run. Long bursts continue as new.
 */
export async function engagementDispatchWorkflow(input: { domainId: string }) {
  let more = true;
  setHandler(moreEventsSignal, () => void (more = true));
  let total = 0;
  for (let rounds = 0; ; rounds++) {
    if (rounds >= ROUNDS_PER_RUN || workflowInfo().continueAsNewSuggested) {
      await continueAsNew<typeof engagementDispatchWorkflow>(input);
    }
    more = false;
    const r = await dispatchEngagementBatch({ domainId: input.domainId, limit: 100 });
    total += r.processed;
    if (r.more) continue;
    if (!(await condition(() => more, '5 seconds'))) break;
  }
  return { domainId: input.domainId, dispatched: total };
}
