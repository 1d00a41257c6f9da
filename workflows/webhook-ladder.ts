import { proxyActivities, proxyLocalActivities, sleep } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import { ladderEnds } from '../core/mail/ladder-ends.js';
import { HEARTBEAT_TIMEOUT, UNLIMITED_RETRY } from './activity-options.js';

const { attemptWebhookDelivery } = proxyActivities<Activities>({
  // The POST itself times out at 15 s; recording its outcome may wait out a database outage (heartbeating).
  startToCloseTimeout: '4 minutes',
  heartbeatTimeout: HEARTBEAT_TIMEOUT,
  retry: UNLIMITED_RETRY,
});

// The first attempt of an inbound delivery runs as a local activity: no server round trips when it
// succeeds (DESIGN.md, The Temporal budget); retries are ordinary activities after durable timers.
const { attemptWebhookDelivery: attemptLocally } = proxyLocalActivities<Activities>({
  startToCloseTimeout: '4 minutes',
  retry: UNLIMITED_RETRY,
});

/**
 * Runs the retry ladder of one delivery from attempt `first`: attempt n+1 follows attempt n after
 * `schedule[n-1]` (durable timers), until one succeeds or the schedule is used up. An attempt whose
 * outcome is recorded is never posted again, so an activity retry (a database outage) does not repeat it.
 */
export async function runLadder(
  deliveryId: string,
  schedule: number[],
  first = 1,
  opts: { firstLocally?: boolean } = {},
) {
  for (let n = first; ; n++) {
    if (n > 1) await sleep(schedule[n - 2]!);
    const next = n - 1 < schedule.length ? schedule[n - 1]! : null;
    const attempt = n === first && opts.firstLocally ? attemptLocally : attemptWebhookDelivery;
    const r = await attempt({ deliveryId, attemptNumber: n, nextDelayMs: next });
    if (ladderEnds(r, next)) return { deliveryId, ok: r.ok, attempts: n, status: r.status, reason: r.reason };
  }
}
