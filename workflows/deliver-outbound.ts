import { proxyActivities, workflowInfo } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';

const { sendQueuedMessages } = proxyActivities<Activities>({
  startToCloseTimeout: '5 minutes',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' },
});

/**
 * Delivers one group-committed batch of queued messages (1 to 100 ids): the activity claims each row
 * for this run, renders, signs and hands it to the provider, and records the outcome on the row.
 */
export async function deliverOutboundWorkflow(input: { messageIds: string[] }) {
  return sendQueuedMessages({ messageIds: input.messageIds, workflowId: workflowInfo().workflowId });
}
