import type { Workflow } from '@temporalio/common';
import { ScheduleAlreadyRunning, ScheduleOverlapPolicy } from '@temporalio/client';
import {
  cleanupAttachmentsScheduleId,
  dkimRotationScheduleId,
  engagementSweepScheduleId,
  pruneAttemptsScheduleId,
  pruneIdempotencyKeysScheduleId,
  sweepHeldInboundScheduleId,
  sweepOutboundScheduleId,
  sweepSequencesScheduleId,
  tlsReportsScheduleId,
} from '../workflows/ids.js';
import { isDeadline, type TemporalHandle } from './client.js';
import { cleanupAttachmentsWorkflow } from '../workflows/cleanup-attachments.js';
import {
  pruneAttemptsWorkflow,
  pruneIdempotencyKeysWorkflow,
  sweepEngagementWorkflow,
  sweepHeldInboundWorkflow,
  sweepSequencesWorkflow,
} from '../workflows/housekeeping.js';
import { sweepOutboundWorkflow } from '../workflows/sweep-outbound.js';
import { scheduleDkimRotationsWorkflow } from '../workflows/dkim-rotation.js';
import { tlsReportsWorkflow } from '../workflows/tls-reports.js';

/** Recurring housekeeping as Temporal Schedules (DESIGN.md); creating one that exists is success. */
export async function ensureSchedules(
  t: TemporalHandle,
  opts: { retrySchedule: number[]; dkimRotationDays?: number; tlsReportPeriodMs?: number },
): Promise<void> {
  const schedules: { scheduleId: string; workflowType: Workflow; every: string; args?: unknown[] }[] = [
    { scheduleId: engagementSweepScheduleId(t.taskQueue), workflowType: sweepEngagementWorkflow, every: '1 minute' },
    { scheduleId: pruneAttemptsScheduleId(t.taskQueue), workflowType: pruneAttemptsWorkflow, every: '1 day' },
    {
      scheduleId: sweepSequencesScheduleId(t.taskQueue),
      workflowType: sweepSequencesWorkflow,
      every: '1 minute',
      args: [{}],
    },
    {
      scheduleId: sweepOutboundScheduleId(t.taskQueue),
      workflowType: sweepOutboundWorkflow,
      every: '1 minute',
      args: [{ retrySchedule: opts.retrySchedule }],
    },
    {
      scheduleId: cleanupAttachmentsScheduleId(t.taskQueue),
      workflowType: cleanupAttachmentsWorkflow,
      every: '1 hour',
      args: [],
    },
    {
      scheduleId: pruneIdempotencyKeysScheduleId(t.taskQueue),
      workflowType: pruneIdempotencyKeysWorkflow,
      every: '1 hour',
    },
    // Held inbound mail past QUARANTINE_DAYS (docs/inbound-policy.md).
    { scheduleId: sweepHeldInboundScheduleId(t.taskQueue), workflowType: sweepHeldInboundWorkflow, every: '1 hour' },
    // TLS_REPORT_PERIOD: once a period, the RFC 8460 reports of the periods that ended (docs/tls-reporting.md).
    ...(opts.tlsReportPeriodMs
      ? [
          {
            scheduleId: tlsReportsScheduleId(t.taskQueue),
            workflowType: tlsReportsWorkflow,
            every: `${Math.max(1, Math.round(opts.tlsReportPeriodMs / 1000))} seconds`,
            args: [{}],
          },
        ]
      : []),
    // DKIM_ROTATION_DAYS: hourly, start the rotation of every domain whose key is older than that (off by default).
    ...(opts.dkimRotationDays
      ? [
          {
            scheduleId: dkimRotationScheduleId(t.taskQueue),
            workflowType: scheduleDkimRotationsWorkflow,
            every: '1 hour',
            args: [{ olderThanMs: opts.dkimRotationDays * 86_400_000 }],
          },
        ]
      : []),
  ];
  for (const s of schedules) await onDeadlineRetry(() => ensureOne(t, s));
}

/** A loaded server may time a call out at startup: each schedule is tried up to 4 times before startup fails. */
async function onDeadlineRetry(fn: () => Promise<void>): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      if (!isDeadline(err) || attempt >= 4) throw err;
      await new Promise((r) => setTimeout(r, 1000 * attempt));
    }
  }
}

async function ensureOne(
  t: TemporalHandle,
  s: { scheduleId: string; workflowType: Workflow; every: string; args?: unknown[] },
): Promise<void> {
  try {
    await t.client.schedule.create({
      scheduleId: s.scheduleId,
      spec: { intervals: [{ every: s.every }] },
      action: {
        type: 'startWorkflow',
        workflowType: s.workflowType,
        taskQueue: t.taskQueue,
        workflowId: s.scheduleId,
        args: s.args ?? [],
      },
      policies: { overlap: ScheduleOverlapPolicy.SKIP },
    });
  } catch (err) {
    if (!(err instanceof ScheduleAlreadyRunning)) throw err;
    // Keep an existing schedule's arguments in step with the configuration of this boot.
    await t.client.schedule.getHandle(s.scheduleId).update((prev) => ({
      ...prev,
      action: {
        ...prev.action,
        type: 'startWorkflow',
        workflowType: s.workflowType,
        taskQueue: t.taskQueue,
        args: s.args ?? [],
      },
    }));
  }
}
