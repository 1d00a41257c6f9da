import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import { ParentClosePolicy, proxyActivities, startChild, workflowInfo } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import { HEARTBEAT_TIMEOUT, sizedTimeoutMs, UNLIMITED_RETRY } from './activity-options.js';
import { deferredDeliveryWorkflow } from './deferred-delivery.js';
import { deferredDeliveryWorkflowId } from './ids.js';
import { SvcMessageId } from './search-attributes.js';

export type DeliverOutboundInput = { messageIds: string[]; retrySchedule: number[]; lanes?: number; perMessageMs?: number };

/** Per message: connect, greeting and DATA each bounded by the SMTP timeout (about a minute), for up to a few MX hosts. */
const PER_MESSAGE_MS = 5 * 60_000;

/**
 * Delivers one group-committed batch of queued messages (1 to 100 ids): the activity claims each row
 * for this run, renders, signs and hands it to the provider, and records each recipient's outcome as
 * its server answers, heartbeating per message. Every row of this run left deferred gets its own
 * deferred-delivery workflow, which outlives this one (also rows an earlier, failed attempt deferred).
 */
export async function deliverOutboundWorkflow(input: DeliverOutboundInput) {
  const { sendQueuedMessages } = proxyActivities<Activities>({
    startToCloseTimeout: sizedTimeoutMs(input.messageIds.length, input.lanes ?? 20, input.perMessageMs ?? PER_MESSAGE_MS),
    heartbeatTimeout: HEARTBEAT_TIMEOUT,
    retry: UNLIMITED_RETRY,
  });
  const firstRetry = input.retrySchedule[0];
  const result = await sendQueuedMessages({
    messageIds: input.messageIds, workflowId: workflowInfo().workflowId,
    nextAttemptAt: firstRetry === undefined ? null : Date.now() + firstRetry,
  });
  await startDeferred(result.deferred, input.retrySchedule);
  return result;
}

/** Starts the retry ladder of each deferred message; one already running (a sweep started it) is left alone. */
export async function startDeferred(messageIds: string[], retrySchedule: number[]): Promise<void> {
  for (const messageId of messageIds) {
    try {
      await startChild(deferredDeliveryWorkflow, {
        workflowId: deferredDeliveryWorkflowId(messageId),
        args: [{ messageId, retrySchedule }],
        parentClosePolicy: ParentClosePolicy.ABANDON,
        typedSearchAttributes: [{ key: SvcMessageId, value: messageId }],
      });
    } catch (err) {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    }
  }
}
