import { executeChild, proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import { deliverOutboundWorkflow } from './deliver-outbound.js';
import { deliverOutboundWorkflowId } from './ids.js';

const { findStrandedMessages } = proxyActivities<Activities>({ startToCloseTimeout: '1 minute' });

/**
 * Run by a Temporal Schedule: finds messages left `queued` by a crash between commit and workflow
 * start, and delivers them in batches of 100. Safe to overlap with live batches: rows are claimed.
 */
export async function sweepOutboundWorkflow(input: { retrySchedule: number[] }): Promise<{ swept: number }> {
  const ids = await findStrandedMessages({ olderThanMs: 60_000, limit: 1000 });
  for (let i = 0; i < ids.length; i += 100) {
    const batch = ids.slice(i, i + 100);
    await executeChild(deliverOutboundWorkflow, {
      workflowId: `${deliverOutboundWorkflowId(batch[0]!)}-sweep`,
      args: [{ messageIds: batch, retrySchedule: input.retrySchedule }],
    });
  }
  return { swept: ids.length };
}
