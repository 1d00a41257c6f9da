import { and, eq, inArray, sql } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { AppError } from '../errors.js';
import { domainOf, parseMailbox } from '../mail/addresses.js';
import type { SendGate } from '../gate/gate.js';
import type { TemplateService } from '../templates/service.js';
import type { Audience } from './audience.js';
import { snapshotAudience } from './audience.js';
import { createBatchQueuer, earlier, failRest, ledgerBatch } from './fanout-batch.js';
import type { UnsubscribeTokens } from '../contacts/unsubscribe.js';
import { log } from '../log.js';
import { bulkHoldMs } from '../mail/bulk.js';

const b = schema.broadcasts;
const r = schema.broadcastRecipients;
const m = schema.messages;
type Progress = { sent: number; failed: number; skipped: number };
export type PreparedBatch = {
  canceled: boolean;
  messageIds: string[];
  skipped: number;
  failed: number;
  firstSeq: number;
  lastSeq: number;
  done: boolean;
  domains: Record<string, number>;
  /** Set when the sender domain's bulk mail is paused: nothing was queued; look again after this many ms (or a resume). */
  heldMs?: number;
};

/**
 * The database side of a broadcast's fan-out workflow: the ledger snapshot, the per-batch step that
 * passes the send gate, re-checks each recipient and inserts its queued message in the same transaction
 * that records the message id on the ledger row (so a retried step never makes a second message), and
 * the final counts.
 */
export function createFanoutService(deps: {
  db: Db;
  templates: TemplateService;
  unsubscribe: UnsubscribeTokens;
  gate: SendGate;
}) {
  const { db } = deps;
  const queueBatch = createBatchQueuer(deps);

  return {
    /** Moves a due broadcast to `sending` and snapshots its audience (idempotent); `canceled` when it was canceled meanwhile. */
    async snapshot(broadcastId: string): Promise<{ canceled: boolean; total: number }> {
      return db.transaction(async (tx) => {
        const [row] = await tx
          .update(b)
          .set({ status: 'sending', updatedAt: Date.now() })
          .where(and(eq(b.id, broadcastId), inArray(b.status, ['scheduled', 'sending'])))
          .returning();
        if (!row) return { canceled: true, total: 0 };
        const total = await snapshotAudience(tx, broadcastId, row.userId, row.audience as Audience);
        await tx.update(b).set({ audienceCount: total }).where(eq(b.id, broadcastId));
        return { canceled: false, total };
      });
    },

    /**
     * The next `limit` ledger entries after `afterSeq`: skip the unsubscribed and suppressed, queue a
     * message for each other one. The send gate judges the account and sender at every batch and reserves
     * the batch's recipients against the plan's caps; when it refuses (the account is no longer verified or
     * is suspended, the sender domain went, or a cap is reached) the recipients it did not take, and every
     * one after them, fail with its code as their reason, and the fan-out ends.
     */
    async prepareBatch(input: {
      broadcastId: string;
      afterSeq: number;
      limit: number;
      progress: Progress;
    }): Promise<PreparedBatch> {
      const none = {
        messageIds: [],
        skipped: 0,
        failed: 0,
        firstSeq: input.afterSeq,
        lastSeq: input.afterSeq,
        domains: {},
      };
      return db.transaction(async (tx) => {
        const p = input.progress;
        const [bc] = await tx
          .update(b)
          .set({ sentCount: p.sent, failCount: p.failed, skipCount: p.skipped, updatedAt: Date.now() })
          .where(and(eq(b.id, input.broadcastId), eq(b.status, 'sending')))
          .returning();
        if (!bc) return { ...none, canceled: true, done: true };
        const from = parseMailbox(bc.fromAddr, 'from');
        const pausedAt = await bulkPausedAt(tx, bc.userId, domainOf(from.address));
        if (pausedAt !== null) return { ...none, canceled: false, done: false, heldMs: bulkHoldMs(pausedAt) };
        const rows = await ledgerBatch(tx, bc.userId, input);
        if (rows.length === 0) return { ...none, canceled: false, done: true };
        const verdict = await deps.gate.judge({ userId: bc.userId, sender: { name: domainOf(from.address) } }, tx);
        const out =
          verdict instanceof AppError
            ? { ...earlier(rows), refusal: verdict }
            : await queueBatch(tx, bc, from, verdict, rows);
        const failed = out.refusal ? await failRest(tx, input.broadcastId, input.afterSeq, out.refusal) : 0;
        return {
          canceled: false,
          messageIds: out.messageIds,
          skipped: out.skipped,
          failed,
          firstSeq: rows[0]!.seq,
          lastSeq: rows.at(-1)!.seq,
          done: rows.length < input.limit || Boolean(out.refusal),
          domains: out.domains,
        };
      });
    },

    /** Final counts from the ledger and the messages; the broadcast ends `sent`, `failed` (nothing sent, or `error`) or `canceled`. */
    async finish(input: { broadcastId: string; canceled: boolean; error?: string }) {
      const [n] = await db
        .select({
          sent: sql<number>`count(*) filter (where ${m.status} = 'sent')::int`,
          // A recipient fails when its message bounced or failed, or when the send gate refused it (ledger `failed`).
          failed: sql<number>`count(*) filter (where ${m.status} in ('bounced', 'failed') or ${r.status} = 'failed')::int`,
          skipped: sql<number>`count(*) filter (where ${r.status} = 'skipped')::int`,
        })
        .from(r)
        .leftJoin(m, eq(m.id, r.messageId))
        .where(eq(r.broadcastId, input.broadcastId));
      const counts = { sent: Number(n?.sent ?? 0), failed: Number(n?.failed ?? 0), skipped: Number(n?.skipped ?? 0) };
      if (input.error) log.error(`[broadcast] ${input.broadcastId} stopped: ${input.error}`);
      const status = input.canceled
        ? ('canceled' as const)
        : input.error || (counts.sent === 0 && counts.failed > 0)
          ? ('failed' as const)
          : ('sent' as const);
      const now = Date.now();
      await db
        .update(b)
        .set({
          status,
          sentCount: counts.sent,
          failCount: counts.failed,
          skipCount: counts.skipped,
          sentAt: status === 'canceled' ? null : now,
          updatedAt: now,
        })
        .where(and(eq(b.id, input.broadcastId), inArray(b.status, ['scheduled', 'sending'])));
      return { status, ...counts };
    },
  };
}
export type FanoutService = ReturnType<typeof createFanoutService>;

/** When the complaint guard paused the account's sending domain `name`'s bulk mail, or null. */
async function bulkPausedAt(tx: Pick<Db, 'select'>, userId: string, name: string): Promise<number | null> {
  const d = schema.domains;
  const [row] = await tx
    .select({ at: d.bulkPausedAt })
    .from(d)
    .where(and(eq(d.userId, userId), eq(d.domain, name)));
  return row?.at ?? null;
}
