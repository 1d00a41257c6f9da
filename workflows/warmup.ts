import { proxyActivities, sleep } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import { UNLIMITED_RETRY } from './activity-options.js';

const { advanceWarmup, finishWarmup } = proxyActivities<Activities>({
  startToCloseTimeout: '1 minute',
  retry: UNLIMITED_RETRY,
});

/**
 * A sending domain's warm-up plan (`warmup-<domain id>`, one per warming domain): each day of the
 * schedule begins on a timer (its daily volume per site applies from then), and after the last day the
 * plan is done. Stopping or restarting the plan terminates this run.
 */
export async function warmupWorkflow(input: { domainId: string; days: number; dayMs: number }) {
  for (let day = 0; day < input.days; day++) {
    if (!(await advanceWarmup({ domainId: input.domainId, day }))) return { outcome: 'stopped' as const, day };
    await sleep(input.dayMs);
  }
  await finishWarmup({ domainId: input.domainId });
  return { outcome: 'done' as const, day: input.days };
}
