import type { Workflow } from '@temporalio/common';
import { ScheduleAlreadyRunning, ScheduleOverlapPolicy } from '@temporalio/client';
import { cleanupAttachmentsScheduleId, engagementSweepScheduleId, pruneAttemptsScheduleId, sweepOutboundScheduleId, sweepSequencesScheduleId } from '../workflows/ids.js';
import type { TemporalHandle } from './client.js';
import { cleanupAttachmentsWorkflow } from '../workflows/cleanup-attachments.js';
import { pruneAttemptsWorkflow, sweepEngagementWorkflow, sweepSequencesWorkflow } from '../workflows/housekeeping.js';
import { sweepOutboundWorkflow } from '../workflows/sweep-outbound.js';

/** Recurring housekeeping as Temporal Schedules (DESIGN.md); creating one that exists is success. */
export async function ensureSchedules(t: TemporalHandle, opts: { retrySchedule: number[] }): Promise<void> {
  const schedules: { scheduleId: string; workflowType: Workflow; every: string; args?: unknown[] }[] = [
    { scheduleId: engagementSweepScheduleId(t.taskQueue), workflowType: sweepEngagementWorkflow, every: '1 minute' },
    { scheduleId: pruneAttemptsScheduleId(t.taskQueue), workflowType: pruneAttemptsWorkflow, every: '1 day' },
    { scheduleId: sweepSequencesScheduleId(t.taskQueue), workflowType: sweepSequencesWorkflow, every: '1 minute', args: [{}] },
    { scheduleId: sweepOutboundScheduleId(t.taskQueue), workflowType: sweepOutboundWorkflow, every: '1 minute', args: [{ retrySchedule: opts.retrySchedule }] },
    { scheduleId: cleanupAttachmentsScheduleId(t.taskQueue), workflowType: cleanupAttachmentsWorkflow, every: '1 hour', args: [] },
  ];
  for (const s of schedules) {
    try {
      await t.client.schedule.create({
        scheduleId: s.scheduleId,
        spec: { intervals: [{ every: s.every }] },
        action: { type: 'startWorkflow', workflowType: s.workflowType, taskQueue: t.taskQueue, workflowId: s.scheduleId, args: s.args ?? [] },
        policies: { overlap: ScheduleOverlapPolicy.SKIP },
      });
    } catch (err) {
      if (!(err instanceof ScheduleAlreadyRunning)) throw err;
      // Keep an existing schedule's arguments in step with the configuration of this boot.
      await t.client.schedule.getHandle(s.scheduleId).update((prev) => ({
        ...prev, action: { ...prev.action, type: 'startWorkflow', workflowType: s.workflowType, taskQueue: t.taskQueue, args: s.args ?? [] },
      }));
    }
  }
}
