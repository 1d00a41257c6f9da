import { and, eq, getTableColumns, sql } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { dayKey, monthKey } from '../usage.js';

/**
 * Everything the send gates read, in one round trip (this is the hot path): the account, the
 * sending domain by name, today's and this month's counters, and which recipients are suppressed.
 */
export async function loadSendContext(db: Db, q: { userId: string; domain: string; emails: string[] }) {
  const u = schema.users;
  const d = schema.domains;
  const c = schema.usageCounters;
  const counter = (period: string) => sql<number>`coalesce((select ${c.count} from ${c} where ${c.userId} = ${u.id} and ${c.period} = ${period}), 0)`;
  const emails = q.emails.length ? q.emails : [''];
  const [row] = await db.select({
    emailVerified: u.emailVerified,
    plan: u.plan,
    domain: getTableColumns(d),
    month: counter(monthKey()),
    day: counter(dayKey()),
    suppressed: sql<string[]>`coalesce((select array_agg(s.email) from ${schema.suppressions} s where s.user_id = ${u.id} and s.email = any(${sql.param(emails)}::text[])), '{}')`,
  }).from(u).leftJoin(d, and(eq(d.userId, u.id), eq(d.domain, q.domain))).where(eq(u.id, q.userId));
  if (!row) return undefined;
  return { ...row, month: Number(row.month), day: Number(row.day), suppressed: new Set(row.suppressed) };
}
