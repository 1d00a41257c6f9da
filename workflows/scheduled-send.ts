import { allHandlersFinished, ApplicationFailure, condition, defineUpdate, ParentClosePolicy, proxyActivities, setHandler, startChild, workflowInfo } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import { deferredDeliveryWorkflow } from './deferred-delivery.js';
import { deferredDeliveryWorkflowId } from './ids.js';

const acts = proxyActivities<Activities>({
  startToCloseTimeout: '5 minutes',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' },
});

/** Cancel the parked send. Answers `canceled`, or fails with `too_late` once sending has started. */
export const cancelUpdate = defineUpdate<{ status: 'canceled' }>('cancelUpdate');

export type ScheduledSendInput = { scheduledSendId: string; messageId: string; scheduledAt: number; retrySchedule: number[] };

/**
 * One scheduled send (`ssnd_`): a durable timer until `scheduledAt` (it survives worker restarts),
 * then the same delivery as an immediate send. A cancel before the timer fires wins; after, it is too late.
 */
export async function scheduledSendWorkflow(input: ScheduledSendInput) {
  let started = false;
  let canceled = false;
  setHandler(cancelUpdate, async () => {
    canceled = true;
    await acts.markScheduledCanceled({ scheduledSendId: input.scheduledSendId });
    return { status: 'canceled' as const };
  }, {
    validator: () => {
      if (started) throw ApplicationFailure.nonRetryable('Sending has already started', 'too_late');
    },
  });

  await condition(() => canceled, Math.max(0, input.scheduledAt - Date.now()));
  if (canceled) {
    await condition(allHandlersFinished); // let the cancel update record the row and answer its caller
    return { outcome: 'canceled' as const };
  }
  started = true;
  const released = await acts.releaseScheduledSend({ scheduledSendId: input.scheduledSendId });
  if (!released.go) return { outcome: 'canceled' as const };
  const result = await acts.sendQueuedMessages({ messageIds: [released.messageId], workflowId: workflowInfo().workflowId });
  for (const messageId of result.deferred) {
    await startChild(deferredDeliveryWorkflow, {
      workflowId: deferredDeliveryWorkflowId(messageId), args: [{ messageId, retrySchedule: input.retrySchedule }],
      parentClosePolicy: ParentClosePolicy.ABANDON,
    });
  }
  await acts.finishScheduledSend({ scheduledSendId: input.scheduledSendId, ok: result.sent + result.deferred.length > 0 });
  return { outcome: 'sent' as const, result };
}
