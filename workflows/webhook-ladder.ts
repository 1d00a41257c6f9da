import { proxyActivities, sleep } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';

const { attemptWebhookDelivery } = proxyActivities<Activities>({
  // The POST itself times out at 15 s; the rest is database work.
  startToCloseTimeout: '45 seconds',
  retry: { initialInterval: '2 seconds', maximumInterval: '1 minute', maximumAttempts: 5 },
});

/**
 * Runs the retry ladder of one delivery from attempt `first`: attempt n+1 follows attempt n after
 * `schedule[n-1]` (durable timers), until one succeeds or the schedule is used up.
 */
export async function runLadder(deliveryId: string, schedule: number[], first = 1) {
  for (let n = first; ; n++) {
    if (n > 1) await sleep(schedule[n - 2]!);
    const next = n - 1 < schedule.length ? schedule[n - 1]! : null;
    const r = await attemptWebhookDelivery({ deliveryId, attemptNumber: n, nextDelayMs: next });
    if (r.ok || next === null || r.reason === 'no_payload' || r.reason === 'not_found') return { deliveryId, ok: r.ok, attempts: n, status: r.status, reason: r.reason };
  }
}
