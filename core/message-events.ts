import { and, desc, eq, lt, sql, type SQL } from 'drizzle-orm';
import type { Db } from '../db/index.js';
import { schema } from '../db/index.js';
import { newId } from './ids.js';
import { ENGAGEMENT_TYPES } from './mail/event-types.js';
import { TRACKING_PATTERN } from './mail/patterns.js';
import { ownedBy, type Actor } from './tenancy.js';

/**
 * `email.failed`: the send gate, judged again as the message left, refused it (docs/sending.md); its `data.reason` is the
 * gate's code. Like `email.deferred` it stays on the timeline: SPEC.md's webhook events are the five engagement types.
 */
export type EventType =
  | 'email.sent'
  | 'email.bounced'
  | 'email.complained'
  | 'email.opened'
  | 'email.clicked'
  | 'email.deferred'
  | 'email.failed'
  | 'email.received'
  | 'domain.sending_paused';
type Tx = Pick<Db, 'insert'>;
type NewEvent = {
  userId: string;
  messageId?: string | null;
  domainId?: string | null;
  type: EventType;
  recipient?: string | null;
  data?: Record<string, unknown>;
};
/** Wakes the engagement dispatcher of a domain that has events routed to a webhook. */
export type EngagementRouter = { nudge(domainId: string, userId: string): void };
/** Hears of each complaint and bounce recorded for a domain (the complaint guard). */
export type FeedbackListener = { note(domainId: string, userId: string): void };
/** Domain events (no message) go to the tracking webhook, else the catch-all route, whatever the domain opted in to. */
export const DOMAIN_EVENT_TYPES = ['domain.sending_paused'] as const;

/** The types an event of a domain can be routed to a webhook for. */
const ROUTABLE_TYPES = new Set<string>([...ENGAGEMENT_TYPES, ...DOMAIN_EVENT_TYPES]);
const isRoutable = (ev: NewEvent) => Boolean(ev.domainId) && ROUTABLE_TYPES.has(ev.type);

/**
 * Whether the domain routes an event of `type` to a webhook, as a condition of the insert itself (no round trip
 * per event, never stale): a tracking webhook takes every type; else a catch-all webhook route takes a domain
 * event, and an engagement type the domain opted in to (`webhook_events`: "all" or a list).
 */
function routedTo(domainId: SQL, type: SQL): SQL {
  const domainEvents = sql.raw(DOMAIN_EVENT_TYPES.map((t) => `'${t}'`).join(', '));
  return sql`exists (select 1 from ${schema.routes} r where r.domain_id = ${domainId}
    and (r.pattern = ${TRACKING_PATTERN} or (r.pattern = '*' and (
      (${type} in (${domainEvents}) and r.action = 'webhook')
      or (${type} not in (${domainEvents}) and exists (select 1 from ${schema.domains} d where d.id = ${domainId}
        and d.webhook_events is not null and (d.webhook_events::jsonb = '"all"'::jsonb or d.webhook_events::jsonb ? ${type})))))))`;
}

/** The webhook state of one new event of a domain: 'pending' when routed, else null. */
function routedState(domainId: string, type: string): SQL<string | null> {
  return sql<string | null>`case when ${routedTo(sql`${domainId}::text`, sql`${type}::text`)} then 'pending' end`;
}

/**
 * `insert into events … select … from unnest(…)`: events inserted from one array per column (placeholders
 * `${prefix}0` to `${prefix}7` and `${prefix}at`, filled by the event service's `arrays`), so a statement
 * carrying them has one text whatever their number (a named prepared statement). Each one's webhook state is
 * decided in the insert, as for a single event. Returns the columns `notify` takes.
 */
export function eventsFromArrays(prefix: string): SQL {
  const p = (i: number, type: string) => sql`${sql.placeholder(`${prefix}${i}`)}::${sql.raw(type)}[]`;
  return sql`insert into ${schema.events} (id, user_id, message_id, domain_id, type, recipient, data, created_at, webhook_state)
    select ev.id, ev.user_id, ev.message_id, ev.domain_id, ev.type, ev.recipient, ev.data, ${sql.placeholder(`${prefix}at`)}::bigint,
      case when ev.routable and ${routedTo(sql`ev.domain_id`, sql`ev.type`)} then 'pending' end
    from unnest(${p(0, 'text')}, ${p(1, 'text')}, ${p(2, 'text')}, ${p(3, 'text')}, ${p(4, 'text')}, ${p(5, 'text')},
      ${p(6, 'jsonb')}, ${p(7, 'bool')}) as ev(id, user_id, message_id, domain_id, type, recipient, data, routable)
    returning domain_id as "domainId", user_id as "userId", webhook_state as "webhookState", type`;
}

/** The delivery timeline: what the service did with each message, newest first. */
export function createEventService(deps: { db: Db }) {
  const { db } = deps;
  const e = schema.events;
  const dto = (r: typeof e.$inferSelect) => ({
    id: r.id,
    type: r.type,
    messageId: r.messageId,
    recipient: r.recipient,
    data: r.data ?? {},
    createdAt: r.createdAt,
  });
  let router: EngagementRouter | undefined;
  let feedback: FeedbackListener | undefined;

  /** Rows for new events; engagement types of a domain get their webhook state decided in the insert. */
  function rows(evs: NewEvent[]) {
    const now = Date.now();
    return evs.map((ev) => ({
      id: newId('evt'),
      userId: ev.userId,
      messageId: ev.messageId ?? null,
      domainId: ev.domainId ?? null,
      type: ev.type,
      recipient: ev.recipient ?? null,
      data: ev.data ?? {},
      createdAt: now,
      webhookState: isRoutable(ev) ? routedState(ev.domainId!, ev.type) : null,
    }));
  }
  const returning = { domainId: e.domainId, userId: e.userId, webhookState: e.webhookState, type: e.type };
  /** Wakes the dispatcher of each domain an inserted event was routed for, and tells the guard of complaints and bounces. */
  function notify(inserted: { domainId: string | null; userId: string; webhookState: string | null; type?: string }[]) {
    const nudge = new Map<string, string>();
    for (const r of inserted) {
      if (r.webhookState === 'pending' && r.domainId) nudge.set(r.domainId, r.userId);
      if (r.domainId && (r.type === 'email.complained' || r.type === 'email.bounced'))
        feedback?.note(r.domainId, r.userId);
    }
    for (const [d, u] of nudge) router?.nudge(d, u);
  }

  return {
    dto,
    attachRouter(r: EngagementRouter) {
      router = r;
    },
    attachFeedback(f: FeedbackListener) {
      feedback = f;
    },
    /** Rows for `evs` to insert in a caller's statement (`returning` its columns), and `notify` with what it returned. */
    prepare: (evs: NewEvent[]) => ({ rows: rows(evs), returning, notify }),
    /** The placeholder values of `eventsFromArrays(prefix)` for `evs`, and `notify` with what it returned. */
    arrays(evs: NewEvent[], prefix: string) {
      const col = (f: (ev: NewEvent) => unknown) => evs.map(f);
      const values: Record<string, unknown> = {
        [`${prefix}0`]: col(() => newId('evt')),
        [`${prefix}1`]: col((ev) => ev.userId),
        [`${prefix}2`]: col((ev) => ev.messageId ?? null),
        [`${prefix}3`]: col((ev) => ev.domainId ?? null),
        [`${prefix}4`]: col((ev) => ev.type),
        [`${prefix}5`]: col((ev) => ev.recipient ?? null),
        [`${prefix}6`]: col((ev) => JSON.stringify(ev.data ?? {})),
        [`${prefix}7`]: col(isRoutable),
        [`${prefix}at`]: Date.now(),
      };
      return { values, notify };
    },
    async record(ev: NewEvent, tx: Tx = db) {
      const out = rows([ev]);
      notify(await tx.insert(e).values(out).returning(returning));
      return { id: out[0]!.id };
    },
    async recordMany(evs: NewEvent[]) {
      if (evs.length === 0) return;
      notify(await db.insert(e).values(rows(evs)).returning(returning));
    },
    /** Records an event about a message by id alone (tracking hits); false when the message is unknown. */
    async recordForMessage(
      messageId: string,
      type: 'email.opened' | 'email.clicked',
      data: Record<string, unknown>,
    ): Promise<boolean> {
      const [m] = await db
        .select({ userId: schema.messages.userId, domainId: schema.messages.domainId })
        .from(schema.messages)
        .where(eq(schema.messages.id, messageId));
      if (!m?.userId) return false;
      await this.record({ userId: m.userId, messageId, domainId: m.domainId, type, data });
      return true;
    },
    /** The actor's events: a scoped key sees only its domain's. */
    async list(actor: Actor, opts: { limit: number; before?: number; messageId?: string; type?: string }) {
      const rows = await db
        .select()
        .from(e)
        .where(
          and(
            ownedBy(actor, e),
            ...(opts.before ? [lt(e.createdAt, opts.before)] : []),
            ...(opts.messageId ? [eq(e.messageId, opts.messageId)] : []),
            ...(opts.type ? [eq(e.type, opts.type)] : []),
          ),
        )
        .orderBy(desc(e.createdAt))
        .limit(opts.limit);
      return rows.map(dto);
    },
  };
}
export type EventService = ReturnType<typeof createEventService>;
