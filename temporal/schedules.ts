import { ScheduleAlreadyRunning, ScheduleOverlapPolicy } from '@temporalio/client';
import { sweepOutboundScheduleId } from '../workflows/ids.js';
import type { TemporalHandle } from './client.js';

/** Recurring housekeeping as Temporal Schedules (DESIGN.md); creating one that exists is success. */
export async function ensureSchedules(t: TemporalHandle): Promise<void> {
  const schedules = [
    { scheduleId: sweepOutboundScheduleId(t.taskQueue), workflowType: 'sweepOutboundWorkflow', every: '1 minute' },
  ];
  for (const s of schedules) {
    try {
      await t.client.schedule.create({
        scheduleId: s.scheduleId,
        spec: { intervals: [{ every: s.every }] },
        action: { type: 'startWorkflow', workflowType: s.workflowType, taskQueue: t.taskQueue, workflowId: s.scheduleId, args: [] },
        policies: { overlap: ScheduleOverlapPolicy.SKIP },
      });
    } catch (err) {
      if (!(err instanceof ScheduleAlreadyRunning)) throw err;
    }
  }
}
