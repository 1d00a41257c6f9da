import { and, eq, getTableColumns, sql } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { createGroupCommit } from '../group-commit.js';
import { dayKey, monthKey } from '../usage.js';

type Query = { userId: string; domain: string; emails: string[] };
export type SendContext = NonNullable<Awaited<ReturnType<typeof readOnce>>>;
/** Recipients one shared read asks about at most (50 per send: some 40 sends). */
const MAX_EMAILS_PER_READ = 2_000;

/**
 * Everything the send gates read, in one round trip (this is the hot path): the account, the
 * sending domain by name, today's and this month's counters, and which recipients are suppressed.
 *
 * Sends of one account and sender domain that arrive while reads are under way share the next read (group
 * commit applied to a read, core/group-commit.ts): one statement asks about all their recipients and each send
 * gets its own recipients' suppressions. They see the account as one read saw it at one instant, as sends
 * arriving together always could; caps are still held by the leases at the write. At low load a send reads at
 * once, alone.
 */
export function createSendContextReader(db: Db) {
  const key = (q: Query) => `${q.userId}\0${q.domain}`;
  const reads = createGroupCommit<Query, SendContext | undefined>({
    write: async (queries) => {
      const emails = [...new Set(queries.flatMap((q) => q.emails))];
      const ctx = await readOnce(db, { userId: queries[0]!.userId, domain: queries[0]!.domain, emails });
      return (q) => ctx && { ...ctx, suppressed: new Set(q.emails.filter((e) => ctx.suppressed.has(e))) };
    },
    // The next group: the first waiting send and those of its account and domain behind it, up to the bound.
    take(pending) {
      const first = key(pending[0]!);
      const picked = [0];
      let emails = pending[0]!.emails.length;
      for (let i = 1; i < pending.length; i++) {
        const q = pending[i]!;
        if (key(q) !== first || emails + q.emails.length > MAX_EMAILS_PER_READ) continue;
        emails += q.emails.length;
        picked.push(i);
      }
      return picked;
    },
    maxInFlight: 4,
  });
  return { load: (q: Query) => reads.write(q) };
}

/** One read of the send context, for one account and domain and any set of recipients. */
async function readOnce(db: Db, q: Query) {
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
