import { proxyActivities, sleep } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import { HEARTBEAT_TIMEOUT, UNLIMITED_RETRY } from './activity-options.js';

const { attemptWebhookDelivery } = proxyActivities<Activities>({
  // The POST itself times out at 15 s; recording its outcome may wait out a database outage (heartbeating).
  startToCloseTimeout: '4 minutes',
  heartbeatTimeout: HEARTBEAT_TIMEOUT,
  retry: UNLIMITED_RETRY,
});

/**
 * Runs the retry ladder of one delivery from attempt `first`: attempt n+1 follows attempt n after
 * `schedule[n-1]` (durable timers), until one succeeds or the schedule is used up. An attempt whose
 * outcome is recorded is never posted again, so an activity retry (a database outage) does not repeat it.
 */
export async function runLadder(deliveryId: string, schedule: number[], first = 1) {
  for (let n = first; ; n++) {
    if (n > 1) await sleep(schedule[n - 2]!);
    const next = n - 1 < schedule.length ? schedule[n - 1]! : null;
    const r = await attemptWebhookDelivery({ deliveryId, attemptNumber: n, nextDelayMs: next });
    if (r.ok || next === null || r.reason === 'no_payload' || r.reason === 'not_found') return { deliveryId, ok: r.ok, attempts: n, status: r.status, reason: r.reason };
  }
}
