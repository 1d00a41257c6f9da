import { condition, defineSignal, proxyActivities, setHandler } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';

const { dispatchEngagementBatch } = proxyActivities<Activities>({
  startToCloseTimeout: '10 minutes',
  retry: { initialInterval: '2 seconds', maximumInterval: '1 minute' },
});

/** More events were recorded for this endpoint (sent with signal-with-start). */
export const moreEventsSignal = defineSignal('moreEventsSignal');

/**
 * Drains one domain's pending engagement events in batches (one POST per event), lingering a few
 * seconds for more before it ends, so a burst of events shares one run.
 */
export async function engagementDispatchWorkflow(input: { domainId: string }) {
  let more = true;
  setHandler(moreEventsSignal, () => void (more = true));
  let total = 0;
  for (let rounds = 0; rounds < 500; rounds++) {
    more = false;
    const r = await dispatchEngagementBatch({ domainId: input.domainId, limit: 100 });
    total += r.processed;
    if (r.more) continue;
    if (!(await condition(() => more, '5 seconds'))) break;
  }
  return { domainId: input.domainId, dispatched: total };
}
