import { sql } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { DB_NOW_MS, type UsageService } from '../usage.js';
import { LEASE_LOST, type LeaseUse } from '../gate/cap-lease.js';
import { createGroupCommit } from '../group-commit.js';

type MessageValues = typeof schema.messages.$inferInsert;
/** One accepted call's writes: its message rows and the recipients they count for the account. */
export type Accept = { userId: string; rows: MessageValues[]; recipients: number; lease?: LeaseUse };
/** Rows per statement at most (a message row binds about 25 parameters; PostgreSQL takes 65,535). */
const MAX_ROWS_PER_FLUSH = 500;

/**
 * Writes accepted sends of plans with no cap with group commit: a send goes out at once when no write is
 * under way; sends that are ready while one is under way share the next statement (one multi-row insert
 * into messages and one upsert of every account's usage counters, together). A caller's promise resolves
 * once its rows and counters are durable. When a shared statement fails, each of its sends is written
 * again on its own, so one bad row fails only its own caller; a send that fails alone rejects its caller.
 */
export function createAcceptWriter(deps: {
  db: Db;
  usage: Pick<UsageService, 'outboundBump'>;
  /** Called with the number of sends in each statement sent (tests and metrics). */
  onFlush?: (sends: number) => void;
}) {
  const { db } = deps;

  /**
   * One statement: the rows, and the counters of their accounts (a data-modifying CTE always runs). Sends
   * taken from a cap lease also move their recipients off the lease row, after the counters are locked (the
   * order every reservation takes them in); unless each such lease row still holds them, unexpired, and the
   * counters stay within the caps the send found (mail received fills the monthly bucket too, and a plan can
   * change), the statement raises LEASE_LOST and nothing of it is written.
   */
  async function writeAll(batch: Accept[]): Promise<void> {
    deps.onFlush?.(batch.length);
    const rows = batch.flatMap((a) => a.rows);
    const insert = db.insert(schema.messages).values(rows);
    const bump = deps.usage.outboundBump(
      db,
      batch.map((a) => ({ userId: a.userId, n: a.recipients, day: a.lease?.day, month: a.lease?.month })),
    );
    if (!bump) return void (await insert);
    const uses = new Map<string, number>();
    for (const a of batch) if (a.lease) uses.set(a.lease.id, (uses.get(a.lease.id) ?? 0) + a.lease.n);
    const leased = batch.flatMap((a) => (a.lease ? [a.lease] : []));
    const col = <T>(f: (u: LeaseUse) => T) => sql.param(leased.map(f));
    const accepted = sql`${insert.returning({ id: schema.messages.id }).getSQL()}`;
    if (uses.size === 0) return void (await db.execute(sql`with accepted as (${accepted}) ${bump.getSQL()}`));
    const [l, c] = [schema.capLeases, schema.usageCounters];
    const bumped = bump.returning({ userId: c.userId, period: c.period, count: c.count }).getSQL();
    await db.execute(sql`with accepted as (${accepted}),
      bumped as (${bumped}),
      used as (
        update ${l} l set amount = l.amount - u.n
        from unnest(${sql.param([...uses.keys()])}::text[], ${sql.param([...uses.values()])}::int[]) as u(id, n)
        where l.id = u.id and l.amount >= u.n and l.expires_at > ${DB_NOW_MS} and (select count(*) from bumped) > 0
        returning l.id),
      beyond as (
        select 1 from bumped b
        join unnest(${col((u) => u.userId)}::text[], ${col((u) => u.day)}::text[], ${col((u) => u.caps.day)}::int[],
          ${col((u) => u.month)}::text[], ${col((u) => u.caps.month)}::int[]) as k(user_id, day, day_cap, month, month_cap)
        on b.user_id = k.user_id
        where (b.period = k.day and b.count > k.day_cap) or (b.period = k.month and b.count > k.month_cap))
      select (case when (select count(*) from used) = ${uses.size} and not exists (select 1 from beyond)
        then '1' else ${LEASE_LOST} end)::int as ok`);
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
