import { proxyLocalActivities } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import { runLadder } from './webhook-ladder.js';

// Database steps of a few milliseconds: local activities (DESIGN.md, The Temporal budget).
const { prepareInboundDeliveries, finishInboundMessage } = proxyLocalActivities<Activities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', maximumInterval: '1 minute' },
});

/**
 * One inbound message: creates a `dlv_` row per matched webhook route and delivers each itself, every
 * attempt an activity writing its `att_` row and the waits between attempts workflow timers, so the
 * whole ladder of one message is one history. Then drops what a zero-retention/encrypted domain may not keep.
 */
export async function inboundDeliveryWorkflow(input: { messageId: string; retrySchedule: number[] }) {
  const { deliveryIds, keepsNoCopy } = await prepareInboundDeliveries({ messageId: input.messageId });
  const results = await Promise.all(deliveryIds.map((id) => runLadder(id, input.retrySchedule)));
  if (keepsNoCopy) await finishInboundMessage({ messageId: input.messageId });
  return { messageId: input.messageId, deliveries: results };
}
