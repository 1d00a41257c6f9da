import { continueAsNew, defineQuery, proxyActivities, setHandler, workflowInfo } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';

const { importContactsChunk } = proxyActivities<Activities>({
  startToCloseTimeout: '5 minutes',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' },
});

export type ImportProgress = {
  status: 'running' | 'done' | 'failed';
  rowsRead: number;
  created: number;
  updated: number;
  rejected: number;
  rejections: { row: number; reason: string }[];
};
/** Rows read, created, updated and rejected (with reasons) so far. */
export const importProgressQuery = defineQuery<ImportProgress | null>('importProgressQuery');

/**
 * One CSV import into a list (`imp_`): chunks of `chunkRows` rows, each an activity that upserts the
 * contacts and moves the offset checkpoint in one transaction, so a worker restart resumes at the
 * last committed chunk. Continues as new every 100 chunks.
 */
export async function importContactsWorkflow(input: { importId: string; chunkRows: number; offset?: number }) {
  let progress: ImportProgress | null = null;
  setHandler(importProgressQuery, () => progress);
  let offset = input.offset ?? 0;
  for (let i = 0; ; i++) {
    if (i >= 100 || workflowInfo().continueAsNewSuggested)
      await continueAsNew<typeof importContactsWorkflow>({ ...input, offset });
    const r = await importContactsChunk({ importId: input.importId, offset, limit: input.chunkRows });
    offset = r.offset;
    progress = r.progress;
    if (r.done) return progress;
  }
}
