import { and, desc, eq, lt } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { newId } from '../ids.js';

export type EventType = 'email.sent' | 'email.bounced' | 'email.complained' | 'email.opened' | 'email.clicked' | 'email.deferred' | 'email.received';
type Tx = Pick<Db, 'insert'>;

/** The delivery timeline: what the service did with each message, newest first. */
export function createEventService(deps: { db: Db }) {
  const { db } = deps;
  const e = schema.events;
  const dto = (r: typeof e.$inferSelect) => ({ id: r.id, type: r.type, messageId: r.messageId, recipient: r.recipient, data: r.data ?? {}, createdAt: r.createdAt });
  return {
    dto,
    async record(ev: { userId: string; messageId?: string | null; domainId?: string | null; type: EventType; recipient?: string | null; data?: Record<string, unknown> }, tx: Tx = db) {
      const row = {
        id: newId('evt'), userId: ev.userId, messageId: ev.messageId ?? null, domainId: ev.domainId ?? null, type: ev.type,
        recipient: ev.recipient ?? null, data: ev.data ?? {}, createdAt: Date.now(),
      };
      await tx.insert(e).values(row);
      return row;
    },
    async recordMany(evs: { userId: string; messageId?: string | null; domainId?: string | null; type: EventType; recipient?: string | null; data?: Record<string, unknown> }[]) {
      if (evs.length === 0) return;
      const now = Date.now();
      await db.insert(e).values(evs.map((ev) => ({
        id: newId('evt'), userId: ev.userId, messageId: ev.messageId ?? null, domainId: ev.domainId ?? null, type: ev.type,
        recipient: ev.recipient ?? null, data: ev.data ?? {}, createdAt: now,
      })));
    },
    async list(userId: string, opts: { limit: number; before?: number; messageId?: string; type?: string }) {
      const rows = await db.select().from(e).where(and(
        eq(e.userId, userId),
        ...(opts.before ? [lt(e.createdAt, opts.before)] : []),
        ...(opts.messageId ? [eq(e.messageId, opts.messageId)] : []),
        ...(opts.type ? [eq(e.type, opts.type)] : []),
      )).orderBy(desc(e.createdAt)).limit(opts.limit);
      return rows.map(dto);
    },
  };
}
export type EventService = ReturnType<typeof createEventService>;
