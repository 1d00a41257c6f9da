import {
  allHandlersFinished,
  ApplicationFailure,
  CancellationScope,
  condition,
  defineSignal,
  defineUpdate,
  isCancellation,
  proxyActivities,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import { HEARTBEAT_TIMEOUT, UNLIMITED_RETRY } from './activity-options.js';
import { startDeferred, waitForSites } from './deliver-outbound.js';

const acts = proxyActivities<Activities>({ startToCloseTimeout: '1 minute', retry: UNLIMITED_RETRY });
const { sendQueuedMessages } = proxyActivities<Activities>({
  startToCloseTimeout: '6 minutes',
  heartbeatTimeout: HEARTBEAT_TIMEOUT,
  retry: UNLIMITED_RETRY,
});

/** Cancel the parked send. Answers `canceled`, or fails with `too_late` once sending has started. */
export const cancelUpdate = defineUpdate<{ status: 'canceled' }>('cancelUpdate');
/** The same cancel as a signal, which an operator can send from the Temporal UI; ignored once sending started. */
export const cancelSignal = defineSignal('cancelSignal');

export type ScheduledSendInput = {
  scheduledSendId: string;
  messageId: string;
  scheduledAt: number;
  retrySchedule: number[];
};

/**
 * One scheduled send (`ssnd_`): a durable timer until `scheduledAt` (it survives worker restarts),
 * then the same delivery as an immediate send. A cancel before the timer fires wins (update, signal, or
 * a cancellation request from the Temporal UI; each is written to the row); after, it is too late.
 */
export async function scheduledSendWorkflow(input: ScheduledSendInput) {
  let started = false;
  let canceled = false;
  setHandler(
    cancelUpdate,
    async () => {
      canceled = true;
      await acts.markScheduledCanceled({ scheduledSendId: input.scheduledSendId });
      return { status: 'canceled' as const };
    },
    {
      validator: () => {
        if (started) throw ApplicationFailure.nonRetryable('Sending has already started', 'too_late');
      },
    },
  );
  setHandler(cancelSignal, () => {
    if (!started) canceled = true;
  });

  try {
    await condition(() => canceled, Math.max(0, input.scheduledAt - Date.now()));
  } catch (err) {
    if (!isCancellation(err)) throw err;
    canceled = true; // "Request cancellation" from the UI or a client: the row says so too
  }
  if (canceled) {
    await CancellationScope.nonCancellable(async () => {
      await acts.markScheduledCanceled({ scheduledSendId: input.scheduledSendId });
      await condition(allHandlersFinished); // let a cancel update record the row and answer its caller
    });
    return { outcome: 'canceled' as const };
  }
  started = true;
  const { workflowId } = workflowInfo();
  const released = await acts.releaseScheduledSend({ scheduledSendId: input.scheduledSendId, workflowId });
  if (!released.go) return { outcome: 'canceled' as const };
  const firstRetry = input.retrySchedule[0];
  const send = (messageIds: string[]) =>
    sendQueuedMessages({
      messageIds,
      workflowId,
      nextAttemptAt: firstRetry === undefined ? null : Date.now() + firstRetry,
    });
  const result = await send([released.messageId]);
  await startDeferred(result.deferred, input.retrySchedule);
  // Its site could not take it yet (traffic shaping): one message, so it waits in this run however long.
  await waitForSites(result, send, input.retrySchedule, false);
  await acts.finishScheduledSend({
    scheduledSendId: input.scheduledSendId,
    ok: result.sent + result.deferred.length > 0,
  });
  return { outcome: 'sent' as const, result };
}
