import {
  CancellationScope,
  ParentClosePolicy,
  proxyLocalActivities,
  startChild,
  workflowInfo,
} from '@temporalio/workflow';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import type { Activities } from '../activities/index.js';
import { sizedTimeoutMs, UNLIMITED_RETRY } from './activity-options.js';
import { inboundDeliveryWorkflowId } from './ids.js';
import { inboundDeliveryWorkflow } from './inbound-delivery.js';
import { SvcAccountId, SvcDomainId, SvcMessageId } from './search-attributes.js';

/** Per message of a batch, 16 at a time: one webhook POST (15 s at most) and its record. */
const LANES = 16;
const PER_MESSAGE_MS = 20_000;

const { finishInboundBatch } = proxyLocalActivities<Activities>({
  startToCloseTimeout: '30 seconds',
  retry: UNLIMITED_RETRY,
});

/**
 * Inbound messages accepted together (README, Receiving; the Temporal budget): the first attempt of every
 * delivery runs in one local activity, so a delivered message costs the Temporal server a share of one
 * run, not a run of its own. A message whose first attempt failed with attempts left is handed to its own
 * `inboundDeliveryWorkflow` (`inbound-<msg id>`), which takes the claim over and runs the rest of the
 * ladder on durable timers. Each message row names the run that holds it; the ids are in its `SvcMessageId` (and the memo).
 */
export async function inboundBatchWorkflow(input: { messageIds: string[]; retrySchedule: number[] }) {
  const batchId = workflowInfo().workflowId;
  const { deliverInboundBatch } = proxyLocalActivities<Activities>({
    startToCloseTimeout: Math.max(240_000, sizedTimeoutMs(input.messageIds.length, LANES, PER_MESSAGE_MS)),
    retry: UNLIMITED_RETRY,
  });
  let over = false;
  try {
    const handOff = await deliverInboundBatch({
      batchId,
      messageIds: input.messageIds,
      nextDelayMs: input.retrySchedule[0] ?? null,
    });
    await Promise.all(
      handOff.map((m) =>
        startChild(inboundDeliveryWorkflow, {
          workflowId: inboundDeliveryWorkflowId(m.messageId),
          args: [{ messageId: m.messageId, retrySchedule: input.retrySchedule, takeOverFrom: batchId }],
          parentClosePolicy: ParentClosePolicy.ABANDON,
          typedSearchAttributes: [
            { key: SvcMessageId, value: [m.messageId] },
            { key: SvcAccountId, value: m.userId },
            ...(m.domainId ? [{ key: SvcDomainId, value: m.domainId }] : []),
          ],
        }).catch((err) => {
          // Already there: an earlier attempt of this run started it.
          if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
        }),
      ),
    );
    over = true;
    return { messages: input.messageIds.length, handedOff: handOff.map((m) => m.messageId) };
  } finally {
    // Cut short (cancelled): the clear copies this run still holds go as they would have after the ladder.
    if (!over)
      await CancellationScope.nonCancellable(() => finishInboundBatch({ batchId, messageIds: input.messageIds }));
  }
}
