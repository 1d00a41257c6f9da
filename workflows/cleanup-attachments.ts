import { proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import { UNLIMITED_RETRY } from './activity-options.js';

const { deleteExpiredAttachments } = proxyActivities<Activities>({
  startToCloseTimeout: '1 minute',
  retry: UNLIMITED_RETRY,
});

const BATCH = 500;
/** Keeps one run's history short; whatever is left waits for the next hourly run. */
const MAX_BATCHES = 100;

/** Run hourly by a Temporal Schedule: deletes expired stored files in batches of 500 until a batch comes back short (idempotent). */
export async function cleanupAttachmentsWorkflow(): Promise<{ deleted: number }> {
  let deleted = 0;
  for (let i = 0; i < MAX_BATCHES; i++) {
    const n = await deleteExpiredAttachments({ limit: BATCH });
    deleted += n;
    if (n < BATCH) break;
  }
  return { deleted };
}
