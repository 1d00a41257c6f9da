import { and, desc, eq, max, sql } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { AppError, badRequest, notFound } from '../errors.js';
import { newId } from '../ids.js';
import { olderThan } from '../contacts/service.js';
import type { SequenceDefinition } from './definition.js';
import type { EventJob, SequenceDispatcher } from './dispatch.js';
import type { Actor } from '../tenancy.js';

const ev = schema.appEvents;
type Row = typeof ev.$inferSelect;
export type PostEventInput = {
  name: string;
  email?: string;
  contactId?: string;
  payload?: Record<string, unknown>;
  dedupeKey?: string;
};

/** SPEC.md Custom event record. */
export const appEventDto = (r: Row) => ({
  id: r.id,
  name: r.name,
  email: r.email,
  contactId: r.contactId,
  payload: r.payload,
  dedupeKey: r.dedupeKey,
  createdAt: r.createdAt,
});
const accepted = (r: Row, duplicate: boolean) => ({
  id: r.id,
  object: 'event' as const,
  name: r.name,
  email: r.email,
  duplicate,
});

/**
 * Application events (POST /v1/events): recorded synchronously, the event and its outbox row in one
 * statement; the dispatcher then starts and wakes enrolments. A repeated `dedupeKey` answers the original.
 */
export function createAppEventService(deps: { db: Db; dispatcher: SequenceDispatcher; cap?: number }) {
  const { db } = deps;
  const cap = deps.cap ?? Number.MAX_SAFE_INTEGER;
  /**
   * Stored events per account (APP_EVENTS_PER_ACCOUNT): counted at most every 10 s per account and
   * process, and kept up to date by this process's inserts in between (a count per event would read
   * the account's whole index on the hot path). Other processes may pass the cap by what they took in
   * those 10 s.
   */
  const counts = new Map<string, { at: number; n: number }>();
  async function storedCount(userId: string): Promise<{ at: number; n: number }> {
    let hit = counts.get(userId);
    if (!hit || Date.now() - hit.at > 10_000) {
      const [row] = await db
        .select({ n: sql<string>`count(*)` })
        .from(ev)
        .where(eq(ev.userId, userId));
      hit = { at: Date.now(), n: Number(row?.n ?? 0) };
      counts.set(userId, hit);
      if (counts.size > 10_000) counts.delete(counts.keys().next().value!);
    }
    return hit;
  }

  async function byDedupeKey(userId: string, key: string): Promise<Row | undefined> {
    return (
      await db
        .select()
        .from(ev)
        .where(and(eq(ev.userId, userId), eq(ev.dedupeKey, key)))
    )[0];
  }

  return {
    async record({ userId }: Actor, input: PostEventInput) {
      if (!input.name) throw badRequest('name is required', 'validation_error');
      if ((input.email === undefined) === (input.contactId === undefined))
        throw badRequest('Give exactly one of email and contactId', 'invalid_target');
      if (input.dedupeKey !== undefined) {
        const seen = await byDedupeKey(userId, input.dedupeKey);
        if (seen) return accepted(seen, true);
      }
      const count = await storedCount(userId);
      if (count.n >= cap)
        throw new AppError(
          403,
          'events_limit',
          `This account stores its cap of ${cap} application events; no more can be recorded`,
        );
      const c = schema.contacts;
      const [contact] = await db
        .select({ id: c.id, email: c.email })
        .from(c)
        .where(
          and(
            eq(c.userId, userId),
            input.contactId ? eq(c.id, input.contactId) : eq(c.email, input.email!.toLowerCase()),
          ),
        );
      if (input.contactId && !contact) throw notFound('Contact not found', 'contact_not_found');
      const row: Row = {
        id: newId('cev'),
        userId,
        name: input.name,
        email: contact?.email ?? input.email!.toLowerCase(),
        contactId: contact?.id ?? null,
        payload: input.payload ?? null,
        dedupeKey: input.dedupeKey ?? null,
        createdAt: Date.now(),
      };
      const insert = sql`insert into ${ev} (id, user_id, name, email, contact_id, payload, dedupe_key, created_at)
        values (${row.id}, ${userId}, ${row.name}, ${row.email}, ${row.contactId}, ${row.payload === null ? null : JSON.stringify(row.payload)}::jsonb, ${row.dedupeKey}, ${row.createdAt})
        on conflict (user_id, dedupe_key) where dedupe_key is not null do nothing returning id`;
      let stored: boolean;
      let outbox: typeof schema.sequenceOutbox.$inferSelect | undefined;
      if (row.contactId) {
        // An event of a known contact may start or wake enrolments: its outbox row commits with it (one statement).
        const job: EventJob = {
          eventId: row.id,
          name: row.name,
          contactId: row.contactId,
          email: row.email,
          payload: row.payload,
          createdAt: row.createdAt,
        };
        outbox = {
          id: newId('sqo'),
          userId,
          kind: 'event',
          data: job as unknown as Record<string, unknown>,
          createdAt: row.createdAt,
          messageId: null,
          email: null,
          held: false,
        };
        const res = await db.execute(sql`with ev as (${insert})
          insert into ${schema.sequenceOutbox} (id, user_id, kind, data, created_at)
          select ${outbox.id}, ${userId}, 'event', ${JSON.stringify(job)}::jsonb, ${row.createdAt}::bigint from ev returning id`);
        stored = rowsOf(res).length > 0;
      } else {
        stored = rowsOf(await db.execute(insert)).length > 0;
      }
      if (!stored) {
        // A concurrent request with the same dedupeKey won the insert.
        const seen = await byDedupeKey(userId, input.dedupeKey ?? '');
        if (!seen) throw new Error('event insert answered no row');
        return accepted(seen, true);
      }
      count.n++;
      if (outbox) deps.dispatcher.enqueue([outbox]);
      return accepted(row, false);
    },

    async list({ userId }: Actor, q: { name?: string; email?: string; before?: string; limit: number }) {
      const anchor = q.before
        ? (
            await db
              .select()
              .from(ev)
              .where(and(eq(ev.userId, userId), eq(ev.id, q.before)))
          )[0]
        : undefined;
      if (q.before && !anchor) throw notFound('No event with the id given as before', 'event_not_found');
      const rows = await db
        .select()
        .from(ev)
        .where(
          and(
            eq(ev.userId, userId),
            q.name ? eq(ev.name, q.name) : undefined,
            q.email ? eq(ev.email, q.email.toLowerCase()) : undefined,
            olderThan(ev.createdAt, ev.id, anchor ? { at: anchor.createdAt, id: anchor.id } : undefined),
          ),
        )
        .orderBy(desc(ev.createdAt), desc(ev.id))
        .limit(q.limit);
      return { events: rows.map(appEventDto) };
    },

    /** Names seen (most recent first), then names only sequences declare (alphabetically); `usedBy` names the sequences. */
    async names({ userId }: Actor) {
      const seen = await db
        .select({ name: ev.name, count: sql<number>`count(*)::int`, lastSeenAt: max(ev.createdAt) })
        .from(ev)
        .where(eq(ev.userId, userId))
        .groupBy(ev.name);
      const seqs = await db
        .select({ name: schema.sequences.name, definition: schema.sequenceVersions.definition })
        .from(schema.sequences)
        .innerJoin(
          schema.sequenceVersions,
          and(
            eq(schema.sequenceVersions.sequenceId, schema.sequences.id),
            eq(schema.sequenceVersions.version, schema.sequences.version),
          ),
        )
        .where(and(eq(schema.sequences.userId, userId), sql`${schema.sequences.status} <> 'archived'`));
      const usedBy = new Map<string, Set<string>>();
      for (const s of seqs) {
        const d = s.definition as unknown as SequenceDefinition;
        const names = [
          ...(d.trigger?.type === 'event' ? [d.trigger.event] : []),
          ...(d.steps ?? []).flatMap((st) => (st.type === 'wait_for_event' ? [st.event] : [])),
        ];
        for (const n of names) usedBy.set(n, (usedBy.get(n) ?? new Set()).add(s.name));
      }
      const users = (n: string) => [...(usedBy.get(n) ?? [])].sort();
      const seenNames = new Set(seen.map((x) => x.name));
      const fromEvents = seen
        .sort((a, b) => Number(b.lastSeenAt) - Number(a.lastSeenAt) || a.name.localeCompare(b.name))
        .map((x) => ({
          name: x.name,
          count: Number(x.count),
          lastSeenAt: x.lastSeenAt === null ? null : Number(x.lastSeenAt),
          usedBy: users(x.name),
        }));
      const declared = [...usedBy.keys()]
        .filter((n) => !seenNames.has(n))
        .sort()
        .map((n) => ({ name: n, count: 0, lastSeenAt: null, usedBy: users(n) }));
      return { events: [...fromEvents, ...declared] };
    },
  };
}
export type AppEventService = ReturnType<typeof createAppEventService>;

/** Rows of a raw `execute` (node-postgres and PGlite both answer `{ rows }`). */
const rowsOf = (res: unknown): unknown[] => (res as { rows?: unknown[] }).rows ?? [];
