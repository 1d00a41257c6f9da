import { and, eq, getTableColumns, sql } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { dayKey, monthKey } from '../usage.js';

/**
 * Everything the send gates read, in one round trip (this is the hot path): the account, the
 * sending domain by name, today's and this month's counters, and which recipients are suppressed.
 */
export async function loadSendContext(db: Db, q: { userId: string; domain: string; emails: string[] }) {
  const [row] = await preparedFor(db).execute({
    userId: q.userId,
    domain: q.domain,
    month: monthKey(),
    day: dayKey(),
    emails: q.emails.length ? q.emails : [''],
  });
  if (!row) return undefined;
  return { ...row, month: Number(row.month), day: Number(row.day), suppressed: new Set(row.suppressed) };
}

/** The statement, built once per database handle and prepared (PostgreSQL parses and plans it once per connection). */
const prepared = new WeakMap<Db, ReturnType<typeof build>>();
function preparedFor(db: Db) {
  let p = prepared.get(db);
  if (!p) prepared.set(db, (p = build(db)));
  return p;
}

function build(db: Db) {
  const u = schema.users;
  const d = schema.domains;
  const c = schema.usageCounters;
  const counter = (period: string) =>
    sql<number>`coalesce((select ${c.count} from ${c} where ${c.userId} = ${u.id} and ${c.period} = ${sql.placeholder(period)}), 0)`;
  return db
    .select({
      emailVerified: u.emailVerified,
      suspendedAt: u.suspendedAt,
      plan: u.plan,
      domain: getTableColumns(d),
      month: counter('month'),
      day: counter('day'),
      suppressed: sql<
        string[]
      >`coalesce((select array_agg(s.email) from ${schema.suppressions} s where s.user_id = ${u.id} and s.email = any(${sql.placeholder('emails')}::text[])), '{}')`,
    })
    .from(u)
    .leftJoin(d, and(eq(d.userId, u.id), eq(d.domain, sql.placeholder('domain'))))
    .where(eq(u.id, sql.placeholder('userId')))
    .prepare('send_context');
}
