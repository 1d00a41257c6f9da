import { sql } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { createGroupCommit } from '../group-commit.js';
import { retryTransient } from '../retry.js';
import { eventsFromArrays, type EventService } from '../message-events.js';
import { named, runNamed } from '../prepared.js';
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
 * The one statement of a group: every message's update, from one array per column, and the insert of their
 * events, from arrays too (a data-modifying CTE always runs), so its text never changes and it is a named
 * prepared statement: nothing is built per group but the arrays, and PostgreSQL plans it once per connection.
 */
const p = (name: string, type: string) => sql`${sql.placeholder(name)}::${sql.raw(type)}[]`;
const STATEMENT = named(
  'outcomes',
  sql`with done as (update ${schema.messages} m set
      recipients = coalesce(m.recipients, '{}'::jsonb) || v.changed,
      trail = coalesce(m.trail, '[]'::jsonb) || jsonb_build_array(v.entry),
      status = coalesce(v.status, m.status),
      attempts = m.attempts + v.inc,
      last_error = case when v.status is null then m.last_error else v.last_error end,
      smtp_message_id = case when v.status is null then m.smtp_message_id else coalesce(v.smtp_id, m.smtp_message_id) end,
      next_attempt_at = case when v.status is null then m.next_attempt_at when v.status in ('deferred', 'queued') then v.next_at else null end,
      bounce_type = case when v.status = 'bounced' then 'hard' else m.bounce_type end,
      sent_at = case when v.sent_any then coalesce(m.sent_at, ${sql.placeholder('at')}::bigint) else m.sent_at end,
      updated_at = ${sql.placeholder('at')}::bigint
    from unnest(${p('id', 'text')}, ${p('changed', 'jsonb')}, ${p('entry', 'jsonb')}, ${p('status', 'text')}, ${p('inc', 'int')},
      ${p('next_at', 'bigint')}, ${p('last_error', 'text')}, ${p('smtp_id', 'text')}, ${p('sent_any', 'bool')})
      as v(id, changed, entry, status, inc, next_at, last_error, smtp_id, sent_any)
    where m.id = v.id returning m.id),
  ins as (${eventsFromArrays('e')})
  select * from ins`,
);

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
    const col = <T>(f: (o: Outcome) => T) => batch.map(f);
    const events = deps.events.arrays(
      batch.flatMap((o) => o.events),
      'e',
    );
    const values = {
      at: Date.now(),
      id: col((o) => o.id),
      changed: col((o) => JSON.stringify(o.changed)),
      entry: col((o) => JSON.stringify(o.entry)),
      status: col((o) => o.final?.status ?? null),
      inc: col((o) => (o.final ? 1 : 0)),
      next_at: col((o) => o.final?.nextAttemptAt ?? null),
      last_error: col((o) => o.final?.lastError ?? null),
      smtp_id: col((o) => o.final?.smtpMessageId ?? null),
      sent_any: col((o) => o.final?.sentAny ?? false),
      ...events.values,
    };
    const inserted = await retryTransient(() => runNamed(db, STATEMENT, values), { onWait: deps.onWait });
    events.notify(inserted.rows as Parameters<typeof events.notify>[0]);
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
