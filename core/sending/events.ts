import { and, desc, eq, lt } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { newId } from '../ids.js';
import { ownedBy, type Actor } from '../tenancy.js';

export type EventType = 'email.sent' | 'email.bounced' | 'email.complained' | 'email.opened' | 'email.clicked' | 'email.deferred' | 'email.received';
type Tx = Pick<Db, 'insert'>;
type NewEvent = { userId: string; messageId?: string | null; domainId?: string | null; type: EventType; recipient?: string | null; data?: Record<string, unknown> };
/** Decides whether an event goes to an engagement webhook, and wakes that domain's dispatcher. */
export type EngagementRouter = { wants(domainId: string, type: string): Promise<boolean>; nudge(domainId: string): void };

/** The delivery timeline: what the service did with each message, newest first. */
export function createEventService(deps: { db: Db }) {
  const { db } = deps;
  const e = schema.events;
  const dto = (r: typeof e.$inferSelect) => ({ id: r.id, type: r.type, messageId: r.messageId, recipient: r.recipient, data: r.data ?? {}, createdAt: r.createdAt });
  let router: EngagementRouter | undefined;

  /** Rows for new events, `pending` for a webhook where the domain routes that type to one. */
  async function rows(evs: NewEvent[]) {
    const now = Date.now();
    const nudge = new Set<string>();
    const asked = new Map<string, boolean>(); // one routing lookup per (domain, type) in a batch, not per event
    const out = [];
    for (const ev of evs) {
      const key = `${ev.domainId}|${ev.type}`;
      if (router && ev.domainId && !asked.has(key)) asked.set(key, await router.wants(ev.domainId, ev.type));
      const routed = asked.get(key) ?? false;
      if (routed) nudge.add(ev.domainId!);
      out.push({
        id: newId('evt'), userId: ev.userId, messageId: ev.messageId ?? null, domainId: ev.domainId ?? null, type: ev.type,
        recipient: ev.recipient ?? null, data: ev.data ?? {}, webhookState: routed ? 'pending' : null, createdAt: now,
      });
    }
    return { out, nudge };
  }

  return {
    dto,
    attachRouter(r: EngagementRouter) {
      router = r;
    },
    async record(ev: NewEvent, tx: Tx = db) {
      const { out, nudge } = await rows([ev]);
      await tx.insert(e).values(out);
      for (const d of nudge) router!.nudge(d);
      return out[0]!;
    },
    async recordMany(evs: NewEvent[]) {
      if (evs.length === 0) return;
      const { out, nudge } = await rows(evs);
      await db.insert(e).values(out);
      for (const d of nudge) router!.nudge(d);
    },
    /** Records an event about a message by id alone (tracking hits); false when the message is unknown. */
    async recordForMessage(messageId: string, type: 'email.opened' | 'email.clicked', data: Record<string, unknown>): Promise<boolean> {
      const [m] = await db.select({ userId: schema.messages.userId, domainId: schema.messages.domainId }).from(schema.messages).where(eq(schema.messages.id, messageId));
      if (!m?.userId) return false;
      await this.record({ userId: m.userId, messageId, domainId: m.domainId, type, data });
      return true;
    },
    /** The actor's events: a scoped key sees only its domain's. */
    async list(actor: Actor, opts: { limit: number; before?: number; messageId?: string; type?: string }) {
      const rows = await db.select().from(e).where(and(
        ownedBy(actor, e),
        ...(opts.before ? [lt(e.createdAt, opts.before)] : []),
        ...(opts.messageId ? [eq(e.messageId, opts.messageId)] : []),
        ...(opts.type ? [eq(e.type, opts.type)] : []),
      )).orderBy(desc(e.createdAt)).limit(opts.limit);
      return rows.map(dto);
    },
  };
}
export type EventService = ReturnType<typeof createEventService>;
