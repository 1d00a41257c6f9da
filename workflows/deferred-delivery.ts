import { proxyActivities, sleep, workflowInfo } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import { HEARTBEAT_TIMEOUT, UNLIMITED_RETRY } from './activity-options.js';

const { retryDeferredMessage } = proxyActivities<Activities>({
  startToCloseTimeout: '15 minutes',
  heartbeatTimeout: HEARTBEAT_TIMEOUT,
  retry: UNLIMITED_RETRY,
});

type Input = { messageId: string; workflowId: string; final: boolean; nextAttemptAt: number | null };

/**
 * Retries one message that failed temporarily, on a backoff ladder over hours to days: each attempt
 * owes only the recipients still deferred; the last temporary failure becomes a hard bounce (status,
 * `email.bounced`, suppression) for those recipients alone. An attempt its site cannot take yet
 * (traffic shaping) waits on a timer and is made again; it is not a step of the ladder.
 */
export async function deferredDeliveryWorkflow(input: { messageId: string; retrySchedule: number[] }) {
  const ladder = input.retrySchedule;
  const { workflowId } = workflowInfo();
  for (let i = 0; i < ladder.length; i++) {
    await sleep(ladder[i]!);
    const final = i === ladder.length - 1;
    const next = final ? null : Date.now() + ladder[i + 1]!;
    const outcome = await attempt({ messageId: input.messageId, workflowId, final, nextAttemptAt: next });
    if (outcome !== 'deferred') return { outcome, attempts: i + 2, workflowId };
  }
  // An empty ladder: nothing to retry, the first temporary failure was the last word.
  const outcome = await attempt({ messageId: input.messageId, workflowId, final: true, nextAttemptAt: null });
  return { outcome, attempts: 2, workflowId };
}

/** One attempt, made again after each wait its site asks for. */
async function attempt(input: Input) {
  for (;;) {
    const outcome = await retryDeferredMessage(input);
    if (typeof outcome !== 'object') return outcome;
    await sleep(Math.max(500, outcome.waitMs));
  }
}
