import { proxyActivities, sleep, workflowInfo } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';

const { retryDeferredMessage } = proxyActivities<Activities>({
  startToCloseTimeout: '5 minutes',
  retry: { initialInterval: '5 seconds', maximumInterval: '5 minutes', maximumAttempts: 10 },
});

/**
 * Retries one message that failed temporarily, on a backoff ladder over hours to days; the last
 * temporary failure becomes a hard bounce (status, `email.bounced`, suppression).
 */
export async function deferredDeliveryWorkflow(input: { messageId: string; retrySchedule: number[] }) {
  const ladder = input.retrySchedule;
  for (let i = 0; i < ladder.length; i++) {
    await sleep(ladder[i]!);
    const final = i === ladder.length - 1;
    const next = final ? null : Date.now() + ladder[i + 1]!;
    const outcome = await retryDeferredMessage({ messageId: input.messageId, final, nextAttemptAt: next });
    if (outcome !== 'deferred') return { outcome, attempts: i + 2, workflowId: workflowInfo().workflowId };
  }
  return { outcome: 'bounced' as const, attempts: ladder.length + 1 };
}
