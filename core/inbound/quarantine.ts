import { and, desc, eq, inArray, lt, sql } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { conflict, notFound } from '../errors.js';
import { FORWARD_HEADER } from '../mail/headers.js';
import type { Forwarder } from '../mailboxes/forward.js';
import type { MailboxStore } from '../mailboxes/store.js';
import { parseMail } from '../parsing/pool.js';
import { ownedBy, type Actor } from '../tenancy.js';
import type { RouteService } from '../webhooks/routes.js';
import { withSpamHeaders, type SpamVerdict } from '../spam/rspamd.js';

const localOf = (address: string) => address.slice(0, address.lastIndexOf('@')).toLowerCase();

/**
 * Deletes held messages (and their raw copies) by id, only while still held; answers the ids deleted. The
 * copies' bytes come off their accounts' storage totals (counted at arrival by the inbound door).
 */
async function removeHeld(db: Db, ids: string[]): Promise<string[]> {
  if (ids.length === 0) return [];
  const m = schema.messages;
  const raw = schema.inboundRaw;
  return db.transaction(async (tx) => {
    const gone = await tx
      .delete(m)
      .where(and(inArray(m.id, ids), eq(m.status, 'held')))
      .returning({ id: m.id, userId: m.userId });
    if (gone.length === 0) return [];
    const copies = await tx
      .delete(raw)
      .where(
        inArray(
          raw.messageId,
          gone.map((g) => g.id),
        ),
      )
      .returning({ messageId: raw.messageId, bytes: sql<number>`length(${raw.content})` });
    const freed = new Map<string, number>();
    for (const c of copies) {
      const userId = gone.find((g) => g.id === c.messageId)?.userId;
      if (userId) freed.set(userId, (freed.get(userId) ?? 0) + Number(c.bytes));
    }
    for (const [userId, bytes] of freed) await storageRemove(tx, userId, bytes);
    return gone.map((g) => g.id);
  });
}

/** Bytes off an account's running storage total (core/storage/quota.ts keeps it; never below 0). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
const storageRemove = (tx: any, userId: string, bytes: number) =>
  bytes > 0
    ? tx
        .update(schema.storageUsage)
        .set({ bytes: sql`greatest(${schema.storageUsage.bytes} - ${bytes}, 0)` })
        .where(eq(schema.storageUsage.userId, userId))
    : Promise.resolve();

/** The scheduled sweep (workflows/housekeeping.ts): held messages past `held_until`, `limit` at a time; answers how many went. */
export async function sweepExpiredHeld(db: Db, limit: number, now = Date.now()): Promise<number> {
  const m = schema.messages;
  const rows = await db
    .select({ id: m.id })
    .from(m)
    .where(and(eq(m.status, 'held'), lt(m.heldUntil, now)))
    .limit(limit);
  return (
    await removeHeld(
      db,
      rows.map((r) => r.id),
    )
  ).length;
}

/**
 * Held inbound mail (docs/inbound-policy.md, Quarantine): a message row with status `held` and its raw
 * copy, kept until `held_until` (QUARANTINE_DAYS after it arrived). The owner lists, releases (delivered
 * once, to its mailbox, forward routes and webhooks, as if it had just arrived) or deletes it; the sweep
 * deletes what expired.
 */
export function createQuarantine(deps: {
  db: Db;
  mailboxStore: MailboxStore;
  forwarder: Forwarder;
  routes: Pick<RouteService, 'matcher'>;
  starts: { enqueue(ids: string[], account: string): void };
}) {
  const m = schema.messages;
  const raw = schema.inboundRaw;
  const held = (actor: Actor, id?: string) =>
    and(
      ownedBy(actor, { userId: m.userId, domainId: m.domainId }),
      eq(m.direction, 'inbound'),
      eq(m.status, 'held'),
      ...(id ? [eq(m.id, id)] : []),
    );

  const dto = (row: typeof m.$inferSelect) => ({
    id: row.id,
    domain_id: row.domainId,
    from: row.fromAddr,
    envelope_from: row.envelopeFrom,
    to: row.toAddrs,
    subject: row.subject,
    held_reason: row.heldReason,
    held_until: row.heldUntil,
    spam: row.spam ?? null,
    auth: row.auth ?? null,
    received_at: row.receivedAt,
  });

  return {
    /** GET /api/inbound/held: the actor's held messages, newest first. */
    async list(actor: Actor, opts: { limit?: number; domain_id?: string } = {}) {
      const rows = await deps.db
        .select()
        .from(m)
        .where(and(held(actor), ...(opts.domain_id ? [eq(m.domainId, opts.domain_id)] : [])))
        .orderBy(desc(m.createdAt), desc(m.id))
        .limit(Math.min(Math.max(opts.limit ?? 50, 1), 100));
      return { data: rows.map(dto) };
    },

    /**
     * POST /api/inbound/held/:id/release: the message turns `received` in the same transaction that files it
     * into its recipients' INBOX (a clear domain), so of two releases only one finds it held (the other: 409
     * already_released); then its forward routes run and its delivery run starts, as at arrival.
     */
    async release(actor: Actor, id: string) {
      const now = Date.now();
      const out = await deps.db.transaction(async (tx) => {
        const [row] = await tx
          .update(m)
          .set({ status: 'received', releasedAt: now, workflowId: null, updatedAt: now })
          .where(held(actor, id))
          .returning();
        if (!row) return undefined;
        const [copy] = await tx.select().from(raw).where(eq(raw.messageId, id));
        const bytes = copy && !copy.encrypted && copy.content.length > 0 ? copy.content : undefined;
        const filed: string[] = [];
        if (bytes && row.domainId && row.userId) {
          // The mailbox copy carries the verdict as X-Spam-* headers, as mail filed at arrival does.
          const boxRaw = row.spam ? withSpamHeaders(bytes, row.spam as unknown as SpamVerdict) : bytes;
          let bodyId: string | undefined;
          for (const rcpt of row.toAddrs) {
            const box = await deps.mailboxStore.fileIn(tx, {
              userId: row.userId,
              domainId: row.domainId,
              address: rcpt,
              folder: 'INBOX',
              raw: boxRaw,
              fromAddr: row.envelopeFrom ?? row.fromAddr,
              subject: row.subject ?? '',
              messageId: id,
              internalDate: row.receivedAt ?? now,
              bodyId,
            });
            if (box) filed.push(box.mailboxId);
            bodyId ??= box?.bodyId;
          }
          // The mailbox body is its one stored copy now (counted by its trigger), as for mail delivered at arrival.
          await tx
            .update(raw)
            .set({ content: Buffer.alloc(0) })
            .where(eq(raw.messageId, id));
          await storageRemove(tx, row.userId, bytes.length);
        }
        return { row, bytes, filed };
      });
      if (!out) {
        const [row] = await deps.db
          .select({ status: m.status })
          .from(m)
          .where(
            and(ownedBy(actor, { userId: m.userId, domainId: m.domainId }), eq(m.id, id), eq(m.direction, 'inbound')),
          );
        if (row) throw conflict('This message is not held (already released)', 'already_released');
        throw notFound('Held message not found');
      }
      const { row, bytes, filed } = out;
      filed.forEach(deps.mailboxStore.notify);
      if (bytes && row.domainId && row.userId) {
        const mail = await parseMail(bytes);
        const match = await deps.routes.matcher(row.domainId);
        if (!mail.headers.has(FORWARD_HEADER.toLowerCase())) {
          for (const rcpt of row.toAddrs) {
            const route = match(localOf(rcpt));
            if (route?.action === 'forward' && route.destination)
              await deps.forwarder.forward({
                userId: row.userId,
                domainId: row.domainId,
                rcpt,
                destination: route.destination,
                raw: bytes,
                mail,
                envelopeFrom: row.envelopeFrom ?? '',
              });
          }
        }
      }
      if (row.userId) deps.starts.enqueue([id], row.userId);
      return { released: true as const, message: dto(row) };
    },

    /** DELETE /api/inbound/held/:id */
    async delete(actor: Actor, id: string) {
      const [row] = await deps.db.select({ id: m.id }).from(m).where(held(actor, id));
      if (!row) throw notFound('Held message not found');
      await removeHeld(deps.db, [id]);
      return { ok: true as const };
    },
  };
}
export type Quarantine = ReturnType<typeof createQuarantine>;
