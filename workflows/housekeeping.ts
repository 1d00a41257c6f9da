import { proxyActivities, startChild } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import { engagementDispatchWorkflow } from './engagement-dispatch.js';
import { engagementDispatchWorkflowId } from './ids.js';

const acts = proxyActivities<Activities>({ startToCloseTimeout: '5 minutes' });

/** Schedule: wakes the dispatcher of every domain with engagement events left pending (a lost nudge). */
export async function sweepEngagementWorkflow() {
  const domains = await acts.findStrandedEngagement({ olderThanMs: 30_000 });
  for (const domainId of domains) {
    await startChild(engagementDispatchWorkflow, { workflowId: `${engagementDispatchWorkflowId(domainId)}-sweep`, args: [{ domainId }] }).catch(() => undefined);
  }
  return { domains: domains.length };
}

/** Schedule: deletes captured delivery attempts older than 45 days (SPEC.md retention). */
export async function pruneAttemptsWorkflow() {
  let deleted = 0;
  for (let i = 0; i < 100; i++) {
    const n = await acts.pruneDeliveryAttempts({ olderThanMs: 45 * 86_400_000, limit: 5000 });
    deleted += n;
    if (n < 5000) break;
  }
  return { deleted };
}
