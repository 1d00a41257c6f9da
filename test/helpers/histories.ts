import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import proto from '@temporalio/proto';
import { connectTemporal } from '../../temporal/client.js';

export const HISTORIES_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', 'histories');
export const HISTORY_EXT = '.binpb';

/** Reads one recorded history back. */
export const readHistory = (buf: Buffer) => proto.temporal.api.history.v1.History.decode(buf);

/**
 * With RECORD_HISTORIES=1, keeps one closed history of every workflow type a test ran on its task queue
 * (test/histories/<type>.binpb, the History protobuf; a run still open replays as far as it got), for the replay test that guards workflow changes (DESIGN.md). Types
 * already recorded are left as they are: delete a file to record it again.
 */
export async function recordHistories(address: string, taskQueue: string): Promise<void> {
  if (process.env.RECORD_HISTORIES !== '1') return;
  mkdirSync(HISTORIES_DIR, { recursive: true });
  const t = await connectTemporal({ address, namespace: 'default', taskQueue, waitMs: 5_000 });
  try {
    for await (const w of t.client.workflow.list({
      query: `TaskQueue = '${taskQueue}' AND ExecutionStatus IN ('Completed', 'ContinuedAsNew', 'Running')`,
    })) {
      const file = join(HISTORIES_DIR, `${w.type}${HISTORY_EXT}`);
      if (existsSync(file)) continue;
      const history = await t.client.workflow.getHandle(w.workflowId, w.runId).fetchHistory();
      writeFileSync(file, proto.temporal.api.history.v1.History.encode(history).finish());
    }
  } finally {
    await t.connection.close();
  }
}

/**
 * Deletes the Temporal Schedules a stopped test stack made on its task queue (temporal/schedules.ts). The
 * dev server is shared by the whole run: left behind, every stack's minute schedules would go on firing
 * for the rest of it, a load that grows with each file and slows the later ones.
 */
export async function dropSchedules(address: string, taskQueue: string): Promise<void> {
  const t = await connectTemporal({ address, namespace: 'default', taskQueue, waitMs: 5_000 });
  try {
    const ids: string[] = [];
    for await (const s of t.client.schedule.list()) if (s.scheduleId.endsWith(`-${taskQueue}`)) ids.push(s.scheduleId);
    for (const id of ids)
      await t.client.schedule
        .getHandle(id)
        .delete()
        .catch(() => undefined);
  } finally {
    await t.connection.close();
  }
}
