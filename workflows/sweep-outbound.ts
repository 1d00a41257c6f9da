import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import { executeChild, ParentClosePolicy, patched, proxyActivities, startChild } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import { UNLIMITED_RETRY } from './activity-options.js';
import { deliverOutboundWorkflow } from './deliver-outbound.js';
import { deliverOutboundWorkflowId } from './ids.js';

const { findStrandedMessages, restartAbandonedMessages, sweepScheduledSends, startUnstartedInbound } =
  proxyActivities<Activities>({ startToCloseTimeout: '2 minutes', retry: UNLIMITED_RETRY });

/**
 * Run by a Temporal Schedule, so nothing accepted is left where no workflow moves it: messages left
 * `queued` by a crash between commit and workflow start are handed to delivery runs of 100 (started,
 * not awaited: one waiting for a suspended site holds up no sweep); deferred or
 * `sending` rows whose run is gone get their deferred ladder back; scheduled sends a crash left
 * unstarted are started, and those an operator terminated are marked canceled; stored inbound messages
 * whose delivery workflow never started get it. Safe to overlap with
 * live work: rows are claimed, workflow ids are derived.
 */
export async function sweepOutboundWorkflow(input: {
  retrySchedule: number[];
  graceMs?: number;
}): Promise<{ swept: number; restarted: number; scheduled: { started: number; canceled: number }; inbound: number }> {
  const grace = input.graceMs ?? 60_000;
  const ids = await findStrandedMessages({ olderThanMs: grace, limit: 1000 });
  for (let i = 0; i < ids.length; i += 100) {
    const batch = ids.slice(i, i + 100);
    const options = {
      workflowId: `${deliverOutboundWorkflowId(batch[0]!)}-sweep`,
      args: [{ messageIds: batch, retrySchedule: input.retrySchedule }] as const,
    };
    // A batch whose site is suspended waits for it on timers: the sweep hands it over and goes on, so
    // the next sweeps (and the other sites' stranded mail) do not wait behind it. Runs started before
    // this change awaited each batch; they replay as they ran.
    if (!patched('sweep-hands-over-batches')) {
      await executeChild(deliverOutboundWorkflow, options);
      continue;
    }
    try {
      await startChild(deliverOutboundWorkflow, { ...options, parentClosePolicy: ParentClosePolicy.ABANDON });
    } catch (err) {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err; // an earlier sweep's run has them
    }
  }
  // A deferred row 10 minutes past its next attempt, or `sending` for two hours: its run was terminated.
  const restarted = await restartAbandonedMessages({
    deferredGraceMs: 10 * 60_000,
    sendingGraceMs: 2 * 3_600_000,
    limit: 500,
  });
  const scheduled = await sweepScheduledSends({ olderThanMs: grace, limit: 500 });
  const inbound = await startUnstartedInbound({ olderThanMs: grace, limit: 1000 });
  return { swept: ids.length, restarted, scheduled, inbound };
}
