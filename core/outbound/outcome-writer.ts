import { sql } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { createGroupCommit } from '../group-commit.js';
import { retryTransient } from '../retry.js';
import type { EventService } from '../message-events.js';
import type { MessageStatus, RecipientStates, TrailEntry } from '../mail/recipients.js';

/** One transaction's outcome for one message; `final` also moves the message's status (its last transaction). */
export type Outcome = {
  id: string;
  changed: RecipientStates;
  entry: TrailEntry;
  final?: {
    status: MessageStatus | 'queued' | 'failed';
    nextAttemptAt: number | null;
    lastError: string | null;
    smtpMessageId: string | null;
    sentAny: boolean;
  };
  events: Parameters<EventService['prepare']>[0];
};
const MAX_PER_FLUSH = 100;

/**
 * Writes delivery outcomes with group commit: an outcome goes out at once when no write is under way;
 * outcomes that complete while one is under way share the next statement (one UPDATE of every message
 * and the insert of their events, together). A caller's promise resolves once its outcome is durable, so
 * each outcome is still recorded before the delivery moves on (DESIGN.md, Delivery semantics); the window
 * a crash can cut is the same one SMTP transaction, plus at most one write already on its way.
 */
export function createOutcomeWriter(deps: { db: Db; events: EventService; onWait?: () => void }) {
  const { db } = deps;

  async function writeAll(batch: Outcome[]): Promise<void> {
    const at = Date.now();
    // One parameter per column (sql.param: drizzle would spread a bare array into a list).
    const col = <T>(f: (o: Outcome) => T) => sql.param(batch.map(f));
    const update = sql`update ${schema.messages} m set
        recipients = coalesce(m.recipients, '{}'::jsonb) || v.changed,
        trail = coalesce(m.trail, '[]'::jsonb) || jsonb_build_array(v.entry),
        status = coalesce(v.status, m.status),
        attempts = m.attempts + v.inc,
        last_error = case when v.status is null then m.last_error else v.last_error end,
        smtp_message_id = case when v.status is null then m.smtp_message_id else coalesce(v.smtp_id, m.smtp_message_id) end,
        next_attempt_at = case when v.status is null then m.next_attempt_at when v.status in ('deferred', 'queued') then v.next_at else null end,
        bounce_type = case when v.status = 'bounced' then 'hard' else m.bounce_type end,
        sent_at = case when v.sent_any then coalesce(m.sent_at, ${at}::bigint) else m.sent_at end,
        updated_at = ${at}::bigint
      from unnest(${col((o) => o.id)}::text[], ${col((o) => JSON.stringify(o.changed))}::jsonb[], ${col((o) => JSON.stringify(o.entry))}::jsonb[],
        ${col((o) => o.final?.status ?? null)}::text[], ${col((o) => (o.final ? 1 : 0))}::int[], ${col((o) => o.final?.nextAttemptAt ?? null)}::bigint[],
        ${col((o) => o.final?.lastError ?? null)}::text[], ${col((o) => o.final?.smtpMessageId ?? null)}::text[], ${col((o) => o.final?.sentAny ?? false)}::bool[])
        as v(id, changed, entry, status, inc, next_at, last_error, smtp_id, sent_any)
      where m.id = v.id`;
    const prepared = deps.events.prepare(batch.flatMap((o) => o.events));
    const inserted = await retryTransient(
      async () => {
        if (!prepared.rows.length) return void (await db.execute(update));
        // One statement: the outcomes and their events commit together (a data-modifying CTE always runs).
        const done = db.$with('done', { id: sql<string>`id` }).as(sql`${update} returning m.id`);
        return db.with(done).insert(schema.events).values(prepared.rows).returning(prepared.returning);
      },
      { onWait: deps.onWait },
    );
    if (inserted) prepared.notify(inserted);
  }

  // A failed statement fails every outcome of it: each caller's retry records its own again.
  return createGroupCommit<Outcome>({
    write: async (batch) => {
      await writeAll(batch);
      return () => undefined;
    },
    max: MAX_PER_FLUSH,
  });
}
export type OutcomeWriter = ReturnType<typeof createOutcomeWriter>;
