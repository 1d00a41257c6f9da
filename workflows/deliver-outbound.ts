import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import {
  continueAsNew,
  ParentClosePolicy,
  proxyActivities,
  sleep,
  startChild,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import type { DeliveryResult } from '../core/outbound/delivery.js';
import { HEARTBEAT_TIMEOUT, sizedTimeoutMs, UNLIMITED_RETRY } from './activity-options.js';
import { deferredDeliveryWorkflow } from './deferred-delivery.js';
import { deferredDeliveryWorkflowId } from './ids.js';
import { SvcMessageId } from './search-attributes.js';

/** `waiting`: messages of this batch whose site could not take them yet, carried over a continue-as-new. */
export type DeliverOutboundInput = {
  messageIds: string[];
  retrySchedule: number[];
  lanes?: number;
  perMessageMs?: number;
  waiting?: { id: string; waitMs: number }[];
};
type Waiting = { id: string; waitMs: number };

/** Per message: connect, greeting and DATA each bounded by the SMTP timeout (about a minute), for up to a few MX hosts. */
const PER_MESSAGE_MS = 5 * 60_000;
/** The shortest nap between two tries at throttled messages; those due within it go together. */
const MIN_WAIT_MS = 500;

/**
 * Delivers one group-committed batch of queued messages (1 to 100 ids): the activity claims each row
 * for this run, renders, signs and hands it to the provider, and records each recipient's outcome as
 * its server answers, heartbeating per message. Every row of this run left deferred gets its own
 * deferred-delivery workflow, which outlives this one (also rows an earlier, failed attempt deferred).
 * Messages whose destination site could not take them (traffic shaping: a suspension, a rate, its
 * connections all in use) wait here on timers and go when their site can take them; the others of the
 * batch were not held up by them.
 */
export async function deliverOutboundWorkflow(input: DeliverOutboundInput) {
  const { sendQueuedMessages } = proxyActivities<Activities>({
    startToCloseTimeout: sizedTimeoutMs(
      input.messageIds.length,
      input.lanes ?? 20,
      input.perMessageMs ?? PER_MESSAGE_MS,
    ),
    heartbeatTimeout: HEARTBEAT_TIMEOUT,
    retry: UNLIMITED_RETRY,
  });
  const firstRetry = input.retrySchedule[0];
  const send = (messageIds: string[]) =>
    sendQueuedMessages({
      messageIds,
      workflowId: workflowInfo().workflowId,
      nextAttemptAt: firstRetry === undefined ? null : Date.now() + firstRetry,
    });
  const result: DeliveryResult = input.waiting
    ? { sent: 0, bounced: 0, skipped: 0, deferred: [], throttled: input.waiting }
    : await send(input.messageIds);
  await startDeferred(result.deferred, input.retrySchedule);
  const rest = await waitForSites(result, send, input.retrySchedule);
  if (rest.length)
    await continueAsNew<typeof deliverOutboundWorkflow>({ ...input, messageIds: rest.map((w) => w.id), waiting: rest });
  return result;
}

/**
 * Tries throttled messages again as their waits run out (each try can throttle them again, with a new
 * wait), adding what each try did to `total`. Answers those still waiting when the history grew long
 * enough that the run should continue as new (when it can).
 */
export async function waitForSites(
  total: DeliveryResult,
  send: (ids: string[]) => Promise<DeliveryResult>,
  retrySchedule: number[],
  canContinueAsNew = true,
): Promise<Waiting[]> {
  let waiting: Waiting[] = total.throttled ?? [];
  while (waiting.length) {
    if (canContinueAsNew && workflowInfo().continueAsNewSuggested) return waiting;
    const nap = Math.max(MIN_WAIT_MS, Math.min(...waiting.map((w) => w.waitMs)));
    await sleep(nap);
    const due = waiting.filter((w) => w.waitMs <= nap);
    const later = waiting.filter((w) => w.waitMs > nap).map((w) => ({ id: w.id, waitMs: w.waitMs - nap }));
    const r = await send(due.map((w) => w.id));
    await startDeferred(r.deferred, retrySchedule);
    total.sent += r.sent;
    total.bounced += r.bounced;
    total.deferred.push(...r.deferred);
    waiting = [...later, ...(r.throttled ?? [])];
  }
  total.throttled = [];
  return [];
}

/** Starts the retry ladder of each deferred message; one already running (a sweep started it) is left alone. */
export async function startDeferred(messageIds: string[], retrySchedule: number[]): Promise<void> {
  for (const messageId of messageIds) {
    try {
      await startChild(deferredDeliveryWorkflow, {
        workflowId: deferredDeliveryWorkflowId(messageId),
        args: [{ messageId, retrySchedule }],
        parentClosePolicy: ParentClosePolicy.ABANDON,
        typedSearchAttributes: [{ key: SvcMessageId, value: [messageId] }],
      });
    } catch (err) {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    }
  }
}
