import { ParentClosePolicy, proxyActivities, startChild, workflowInfo } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import { deferredDeliveryWorkflow } from './deferred-delivery.js';
import { deferredDeliveryWorkflowId } from './ids.js';

const { sendQueuedMessages } = proxyActivities<Activities>({
  startToCloseTimeout: '5 minutes',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' },
});

export type DeliverOutboundInput = { messageIds: string[]; retrySchedule: number[] };

/**
 * Delivers one group-committed batch of queued messages (1 to 100 ids): the activity claims each row
 * for this run, renders, signs and hands it to the provider, and records the outcome on the row. Each
 * temporary failure gets its own deferred-delivery workflow, which outlives this one.
 */
export async function deliverOutboundWorkflow(input: DeliverOutboundInput) {
  const result = await sendQueuedMessages({ messageIds: input.messageIds, workflowId: workflowInfo().workflowId });
  for (const messageId of result.deferred) {
    await startChild(deferredDeliveryWorkflow, {
      workflowId: deferredDeliveryWorkflowId(messageId),
      args: [{ messageId, retrySchedule: input.retrySchedule }],
      parentClosePolicy: ParentClosePolicy.ABANDON,
    });
  }
  return result;
}
