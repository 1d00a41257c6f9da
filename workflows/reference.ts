import { proxyLocalActivities } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';

const { benchmarkNoop } = proxyLocalActivities<Activities>({ startToCloseTimeout: '10 seconds' });

/**
 * The benchmarks' yardstick (DESIGN.md, The Temporal budget): a workflow with two local activities that
 * do nothing, so `npm run bench:inbound` can compare inbound delivery with Temporal's own cost on this box.
 */
export async function referenceWorkflow(): Promise<void> {
  await benchmarkNoop();
  await benchmarkNoop();
}
