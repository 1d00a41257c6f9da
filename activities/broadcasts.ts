import type { FanoutService } from '../core/broadcasts/fanout.js';
import type { ImportService } from '../core/contacts/imports.js';

/** Broadcast and import activities: database steps, each idempotent (ledger rows and the import checkpoint guard retries). */
export function broadcastActivities(deps: { fanout: FanoutService; imports: ImportService }) {
  return {
    /** Moves the broadcast to `sending` and copies its audience into the ledger once. */
    snapshotBroadcastAudience: (input: { broadcastId: string }) => deps.fanout.snapshot(input.broadcastId),
    /** Queues the messages of the next ledger entries (re-checking unsubscribes and suppressions); a retry answers the same ids. */
    prepareBroadcastBatch: (input: {
      broadcastId: string;
      afterSeq: number;
      limit: number;
      progress: { sent: number; failed: number; skipped: number };
    }) => deps.fanout.prepareBatch(input),
    /** Writes the final counts and status (only from `scheduled`/`sending`). */
    finishBroadcast: (input: { broadcastId: string; canceled: boolean; error?: string }) => deps.fanout.finish(input),
    /** Imports one chunk of CSV rows and moves the offset checkpoint in the same transaction. */
    importContactsChunk: (input: { importId: string; offset: number; limit: number }) =>
      deps.imports.importChunk(input),
  };
}
