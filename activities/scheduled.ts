import type { ScheduledSendService } from '../core/sending/scheduled.js';

/** Scheduled-send activities: row state changes, each guarded by the current status (idempotent). */
export function scheduledActivities(deps: { scheduled: ScheduledSendService }) {
  return {
    releaseScheduledSend: (input: { scheduledSendId: string; workflowId: string }) =>
      deps.scheduled.release(input.scheduledSendId, input.workflowId),
    /** Starts scheduled sends a crash left unstarted; writes `canceled` where an operator terminated the run. */
    sweepScheduledSends: (input: { olderThanMs: number; limit: number }) => deps.scheduled.sweep(input),
    markScheduledCanceled: (input: { scheduledSendId: string }) => deps.scheduled.markCanceled(input.scheduledSendId),
    finishScheduledSend: (input: { scheduledSendId: string; ok: boolean }) =>
      deps.scheduled.markDone(input.scheduledSendId, input.ok),
  };
}
