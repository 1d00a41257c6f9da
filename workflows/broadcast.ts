import {
  condition,
  continueAsNew,
  defineQuery,
  defineSignal,
  executeChild,
  patched,
  proxyActivities,
  proxyLocalActivities,
  setHandler,
  sleep,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import { deliverOutboundWorkflow } from './deliver-outbound.js';
import { broadcastBatchWorkflowId } from './ids.js';
import { SvcAccountId, SvcBroadcastId, SvcBroadcastStatus, SvcMessageId } from './search-attributes.js';

const retry = { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' } as const;
const acts = proxyActivities<Activities>({ startToCloseTimeout: '10 minutes', retry });
// One batch's database step takes milliseconds: a local activity (DESIGN.md, The Temporal budget).
const { prepareBroadcastBatch } = proxyLocalActivities<Activities>({ startToCloseTimeout: '1 minute', retry });

/** Stop sending: no batch starts after it; batches in flight finish; the broadcast ends `canceled`. */
export const cancelSignal = defineSignal('cancelSignal');
/** The sender domain's bulk mail was resumed (the complaint guard): a broadcast waiting on the pause looks again now. */
export const bulkResumedSignal = defineSignal('bulkResumedSignal');
export type BroadcastProgress = {
  phase: string;
  sent: number;
  failed: number;
  skipped: number;
  remaining: number | null;
  currentBatch: number;
  audience: number | null;
};
/** Live counts for GET /api/broadcasts/:id and the Temporal UI. */
export const progressQuery = defineQuery<BroadcastProgress>('progressQuery');

/** Carried across continue-as-new: the ledger cursor, the counts, and when each recipient domain may be sent to next. */
type State = {
  cursor: number;
  total: number;
  sent: number;
  failed: number;
  skipped: number;
  batch: number;
  nextFree: Record<string, number>;
};
export type BroadcastInput = {
  broadcastId: string;
  userId: string;
  scheduledAt?: number;
  retrySchedule: number[];
  batchSize: number;
  concurrency: number;
  domainRate: number;
  batchesPerRun: number;
  state?: State;
};

/**
 * One broadcast (`bct_`): waits on a durable timer until `scheduledAt` (cancellable), snapshots the audience
 * into the ledger, then queues and delivers it batch by batch (each batch one outbound delivery child run),
 * at most `concurrency` batches in flight and at most `domainRate` recipients/s per recipient domain. The
 * workflow carries only a cursor; history stays bounded by continuing as new every `batchesPerRun` batches.
 */
export async function broadcastWorkflow(input: BroadcastInput) {
  let canceled = false;
  const s: State = input.state ?? { cursor: 0, total: 0, sent: 0, failed: 0, skipped: 0, batch: 0, nextFree: {} };
  let phase = input.state ? 'sending' : input.scheduledAt ? 'scheduled' : 'sending';
  let woken = false;
  setHandler(cancelSignal, () => void (canceled = true));
  setHandler(bulkResumedSignal, () => void (woken = true));
  setHandler(progressQuery, () => ({
    phase: canceled ? 'canceling' : phase,
    sent: s.sent,
    failed: s.failed,
    skipped: s.skipped,
    remaining: phase === 'scheduled' ? null : Math.max(0, s.total - s.cursor),
    currentBatch: s.batch,
    audience: phase === 'scheduled' ? null : s.total,
  }));
  const finish = async (error?: string) => {
    const r = await acts.finishBroadcast({ broadcastId: input.broadcastId, canceled, error });
    upsertSearchAttributes([{ key: SvcBroadcastStatus, value: r.status }]);
    return r;
  };

  if (!input.state) {
    if (input.scheduledAt) await condition(() => canceled, Math.max(0, input.scheduledAt - Date.now()));
    if (canceled) return finish();
    const snap = await acts.snapshotBroadcastAudience({ broadcastId: input.broadcastId });
    if (snap.canceled) return { status: 'canceled' as const };
    s.total = snap.total;
    phase = 'sending';
    upsertSearchAttributes([{ key: SvcBroadcastStatus, value: 'sending' }]);
  }

  const inflight = new Map<number, Promise<void>>();
  let error: string | undefined;
  for (let run = 0; !canceled; run++) {
    if (run >= input.batchesPerRun || workflowInfo().continueAsNewSuggested) {
      await Promise.all(inflight.values());
      const now = Date.now();
      const nextFree = Object.fromEntries(Object.entries(s.nextFree).filter(([, t]) => t > now));
      await continueAsNew<typeof broadcastWorkflow>({ ...input, state: { ...s, nextFree } });
    }
    let b: Awaited<ReturnType<typeof prepareBroadcastBatch>>;
    try {
      b = await prepareBroadcastBatch({
        broadcastId: input.broadcastId,
        afterSeq: s.cursor,
        limit: input.batchSize,
        progress: { sent: s.sent, failed: s.failed, skipped: s.skipped },
      });
    } catch (err) {
      // Only a failure that retrying cannot fix gets here (infrastructure errors retry without limit).
      error = (err as Error).cause instanceof Error ? ((err as Error).cause as Error).message : (err as Error).message;
      break;
    }
    if (b.canceled) {
      await Promise.all(inflight.values());
      return { status: 'canceled' as const };
    }
    // The sender domain's bulk mail is paused (the complaint guard): no batch until a resume, then from this cursor on.
    if (b.heldMs !== undefined && patched('broadcast-bulk-pause')) {
      phase = 'paused';
      woken = false;
      await condition(() => canceled || woken, b.heldMs);
      phase = 'sending';
      continue;
    }
    s.cursor = b.lastSeq;
    s.skipped += b.skipped;
    s.failed += b.failed ?? 0; // recipients the send gate refused (absent from results recorded before it counted them)
    if (b.messageIds.length) {
      const wait = pace(s, b.domains, input.domainRate);
      if (wait > 0) await sleep(wait);
      const n = ++s.batch;
      const ids = b.messageIds;
      inflight.set(
        n,
        executeChild(deliverOutboundWorkflow, {
          workflowId: broadcastBatchWorkflowId(input.broadcastId, b.firstSeq),
          args: [{ messageIds: ids, retrySchedule: input.retrySchedule }],
          // Every id of the batch, so `SvcMessageId = '<id>'` finds it (about 3.1 KB: the server's value limit is raised to 4 KB).
          typedSearchAttributes: [
            { key: SvcBroadcastId, value: input.broadcastId },
            { key: SvcAccountId, value: input.userId },
            { key: SvcMessageId, value: ids },
          ],
        })
          .then(
            (r) => {
              s.sent += r.sent;
              s.failed += r.bounced;
            },
            () => {
              s.failed += ids.length;
            },
          )
          .finally(() => void inflight.delete(n)),
      );
    }
    if (b.done) break;
    if (inflight.size >= input.concurrency) await Promise.race(inflight.values());
  }
  await Promise.all(inflight.values());
  return finish(error);
}

/** Milliseconds to wait before a batch so no recipient domain goes over `rate` recipients/s; books the batch. */
function pace(s: State, domains: Record<string, number>, rate: number): number {
  if (rate <= 0) return 0;
  const now = Date.now();
  let start = now;
  for (const d of Object.keys(domains)) start = Math.max(start, s.nextFree[d] ?? 0);
  for (const [d, n] of Object.entries(domains)) s.nextFree[d] = start + (n * 1000) / rate;
  return start - now;
}
