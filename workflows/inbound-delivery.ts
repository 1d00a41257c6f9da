import { CancellationScope, proxyLocalActivities } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import { UNLIMITED_RETRY } from './activity-options.js';
import { runLadder } from './webhook-ladder.js';

// Database steps of a few milliseconds: local activities (DESIGN.md, The Temporal budget).
const { prepareInboundDeliveries, finishInboundMessage } = proxyLocalActivities<Activities>({
  startToCloseTimeout: '30 seconds',
  retry: UNLIMITED_RETRY,
});

/**
 * One inbound message: creates a `dlv_` row per matched webhook route and delivers each itself, every
 * attempt an activity writing its `att_` row and the waits between attempts workflow timers, so the
 * whole ladder of one message is one history. Whatever happens to the ladder (a failure, a cancel),
 * a zero-retention or encrypted domain's clear copy is dropped afterwards: that promise runs in `finally`.
 * Started by the sweep for a message no batch took, or by an inbound batch (`takeOverFrom`) for a message
 * whose first attempt failed: that attempt is recorded, so the ladder answers it from its row and goes on.
 * A message another run holds is left to it (no deliveries).
 */
export async function inboundDeliveryWorkflow(input: {
  messageId: string;
  retrySchedule: number[];
  takeOverFrom?: string;
}) {
  const { deliveryIds, keepsNoCopy } = await prepareInboundDeliveries({
    messageId: input.messageId,
    ...(input.takeOverFrom ? { takeOverFrom: input.takeOverFrom } : {}),
  });
  try {
    const results = await Promise.all(
      deliveryIds.map((id) => runLadder(id, input.retrySchedule, 1, { firstLocally: true })),
    );
    return { messageId: input.messageId, deliveries: results };
  } finally {
    if (keepsNoCopy) await CancellationScope.nonCancellable(() => finishInboundMessage({ messageId: input.messageId }));
  }
}
