import { sql, type SQL } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { DB_NOW_MS, outboundCounts } from '../usage.js';
import { LEASE_LOST, type LeaseUse } from '../gate/cap-lease.js';
import { createGroupCommit } from '../group-commit.js';
import { arrayInsert } from '../array-insert.js';
import { named, namedCache, runNamed, type Named } from '../prepared.js';

type MessageValues = typeof schema.messages.$inferInsert;
/** One accepted call's writes: its message rows and the recipients they count for the account. */
export type Accept = { userId: string; rows: MessageValues[]; recipients: number; lease?: LeaseUse };
/** Rows per statement at most (each column's values go in as one array: this bounds the statement's size). */
const MAX_ROWS_PER_FLUSH = 500;

/** The three shapes of the statement: the rows alone (no recipient to count), with the counters, and with leases. */
type Shape = 'rows' | 'counters' | 'leases';
const messageRows = arrayInsert(schema.messages);
const c = schema.usageCounters;
const l = schema.capLeases;
const p = (name: string) => sql.placeholder(name);
/** The counters upsert, from arrays: each (account, period) adds its count (rows already in lock order). */
const bump = sql`insert into ${c} (${sql.identifier(c.userId.name)}, ${sql.identifier(c.period.name)}, ${sql.identifier(c.count.name)})
  select * from unnest(${p('cu')}::text[], ${p('cp')}::text[], ${p('cn')}::int[])
  on conflict (${sql.identifier(c.userId.name)}, ${sql.identifier(c.period.name)})
  do update set ${sql.identifier(c.count.name)} = ${c.count} + excluded.count`;

/**
 * One statement: the rows, and the counters of their accounts (a data-modifying CTE always runs). Sends
 * taken from a cap lease also move their recipients off the lease row, after the counters are locked (the
 * order every reservation takes them in); unless each such lease row still holds them, unexpired, and the
 * counters stay within the caps the send found (mail received fills the monthly bucket too, and a plan can
 * change), the statement raises LEASE_LOST and nothing of it is written.
 */
function statementOf(shape: Shape, accepted: SQL): SQL {
  if (shape === 'rows') return accepted;
  if (shape === 'counters') return sql`with accepted as (${accepted}) ${bump}`;
  return sql`with accepted as (${accepted}),
      bumped as (${bump} returning ${sql.identifier(c.userId.name)}, ${sql.identifier(c.period.name)}, ${sql.identifier(c.count.name)}),
      used as (
        update ${l} l set amount = l.amount - u.n
        from unnest(${p('lid')}::text[], ${p('ln')}::int[]) as u(id, n)
        where l.id = u.id and l.amount >= u.n and l.expires_at > ${DB_NOW_MS} and (select count(*) from bumped) > 0
        returning l.id),
      beyond as (
        select 1 from bumped b
        join unnest(${p('ku')}::text[], ${p('kd')}::text[], ${p('kdc')}::int[],
          ${p('km')}::text[], ${p('kmc')}::int[]) as k(user_id, day, day_cap, month, month_cap)
        on b.user_id = k.user_id
        where (b.period = k.day and b.count > k.day_cap) or (b.period = k.month and b.count > k.month_cap))
      select (case when (select count(*) from used) = ${p('leases')} and not exists (select 1 from beyond)
        then '1' else ${p('lost')} end)::int as ok`;
}
/** Each shape's text for each set of message columns a group writes, built once. */
const statements = namedCache();
const statementFor = (shape: Shape, variant: string, cols: Parameters<typeof messageRows.statement>[0]): Named =>
  statements(`${shape} ${variant}`, () =>
    named(`accept_${shape}`, statementOf(shape, messageRows.statement(cols, 'm'))),
  );

/**
 * Writes accepted sends of plans with no cap with group commit: a send goes out at once when no write is
 * under way; sends that are ready while one is under way share the next statement (one multi-row insert
 * into messages and one upsert of every account's usage counters, together). A caller's promise resolves
 * once its rows and counters are durable. When a shared statement fails, each of its sends is written
 * again on its own, so one bad row fails only its own caller; a send that fails alone rejects its caller.
 * The statement's text depends only on its shape (core/array-insert.ts): a named prepared statement per connection.
 */
export function createAcceptWriter(deps: {
  db: Db;
  /** Called with the number of sends in each statement sent (tests and metrics). */
  onFlush?: (sends: number) => void;
}) {
  const { db } = deps;

  async function writeAll(batch: Accept[]): Promise<void> {
    deps.onFlush?.(batch.length);
    const rows = batch.flatMap((a) => a.rows) as Record<string, unknown>[];
    const { variant, columns } = messageRows.columnsOf(rows);
    const values: Record<string, unknown> = messageRows.values(columns, rows, 'm');
    const counts = outboundCounts(
      batch.map((a) => ({ userId: a.userId, n: a.recipients, day: a.lease?.day, month: a.lease?.month })),
    );
    if (counts.length === 0) {
      await runNamed(db, statementFor('rows', variant, columns), values);
      return;
    }
    values.cu = counts.map((x) => x.userId);
    values.cp = counts.map((x) => x.period);
    values.cn = counts.map((x) => x.count);
    const uses = new Map<string, number>();
    for (const a of batch) if (a.lease) uses.set(a.lease.id, (uses.get(a.lease.id) ?? 0) + a.lease.n);
    if (uses.size === 0) {
      await runNamed(db, statementFor('counters', variant, columns), values);
      return;
    }
    const leased = batch.flatMap((a) => (a.lease ? [a.lease] : []));
    Object.assign(values, {
      lid: [...uses.keys()],
      ln: [...uses.values()],
      ku: leased.map((u) => u.userId),
      kd: leased.map((u) => u.day),
      kdc: leased.map((u) => u.caps.day),
      km: leased.map((u) => u.month),
      kmc: leased.map((u) => u.caps.month),
      leases: uses.size,
      lost: LEASE_LOST,
    });
    await runNamed(db, statementFor('leases', variant, columns), values);
  }

  return createGroupCommit<Accept>({
    write: async (batch) => {
      await writeAll(batch);
      return () => undefined;
    },
    // The next group: what waits, up to the row bound (always at least one send).
    take(pending) {
      let rows = 0;
      let i = 0;
      while (i < pending.length && (i === 0 || rows + pending[i]!.rows.length <= MAX_ROWS_PER_FLUSH))
        rows += pending[i++]!.rows.length;
      return [...Array(i).keys()];
    },
    alone: true,
    // A send waits on another's statement only when several are under way: at a moderate rate each still
    // goes out at once. Groups take counter and lease rows in one order, so concurrent ones cannot deadlock.
    maxInFlight: 4,
  });
}
export type AcceptWriter = ReturnType<typeof createAcceptWriter>;
