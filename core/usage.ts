import { and, eq, inArray, or, sql, type Placeholder } from 'drizzle-orm';
import type { Db } from '../db/index.js';
import { schema } from '../db/index.js';
import type { Plan } from './plans.js';
import { newId } from './ids.js';

const iso = (now: Date) => now.toISOString();
export const monthKey = (now = new Date()) => `m:${iso(now).slice(0, 7)}`;
/**
 * The statement that counts `n` messages in the account's bucket of this month (SPEC.md: inbound and outbound
 * share it); a builder, so the inbound door can run it inside its own statement (as a CTE, with placeholders).
 */
export const billMonth = (
  q: Pick<Db, 'insert'>,
  userId: string | Placeholder,
  n: number,
  period: string | Placeholder = monthKey(),
) =>
  q
    .insert(schema.usageCounters)
    .values({ userId, period, count: n })
    .onConflictDoUpdate({
      target: [schema.usageCounters.userId, schema.usageCounters.period],
      set: { count: sql`${schema.usageCounters.count} + excluded.count` },
    });
export const dayKey = (now = new Date()) => `d:${iso(now).slice(0, 10)}`;
/** Seconds until the next UTC midnight, for Retry-After on the daily cap. */
export const secondsToMidnight = (now = new Date()) =>
  Math.max(
    1,
    Math.ceil((Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1) - now.getTime()) / 1000),
  );

type Tx = Pick<Db, 'insert'>;
type ReserveTx = Pick<Db, 'insert' | 'select' | 'execute'>;
/** PostgreSQL's clock in ms: every process judges lease expiry by this one clock, at the moment it runs. */
export const DB_NOW_MS = sql`(extract(epoch from clock_timestamp()) * 1000)::bigint`;
/** Cap allowance leased to a process for the account's day and month (see core/gate/cap-lease.ts). */
export type LeaseGrant = { id: string; userId: string; day: string; month: string; amount: number };
/** The machine code of the overage block: usage `overage.code` and the send refusal (402) both carry it. */
export const OVERAGE_BLOCK_CODE = 'monthly_quota_exceeded';
/** Which cap refused a reservation. */
export type CapHit = 'daily' | 'monthly';
const room = (plan: Plan, used: { month: number; day: number }) => ({
  daily: plan.dailySendCap === null ? Infinity : Math.max(0, plan.dailySendCap - used.day),
  monthly:
    plan.includedEmails === null || plan.overage !== 'block' ? Infinity : Math.max(0, plan.includedEmails - used.month),
});

/**
 * Usage against the plan: the monthly bucket (inbound and outbound share it) and the daily send cap,
 * kept as counters bumped in the same transaction that accepts the mail.
 */
export function createUsageService(deps: { db: Db; plans: Record<string, Plan>; defaultPlan: string }) {
  const { db } = deps;
  const c = schema.usageCounters;
  const planOf = (name: string): Plan => deps.plans[name] ?? deps.plans[deps.defaultPlan]!;

  async function counts(userId: string, at = new Date()): Promise<{ month: number; day: number }> {
    const rows = await db
      .select()
      .from(c)
      .where(and(eq(c.userId, userId), inArray(c.period, [monthKey(at), dayKey(at)])));
    return {
      month: rows.find((r) => r.period === monthKey(at))?.count ?? 0,
      day: rows.find((r) => r.period === dayKey(at))?.count ?? 0,
    };
  }
  /** The capped counters of a plan for the day and month of `at`, day first (the order every reservation locks them in). */
  const capsOf = (plan: Plan, at: Date): [string, number, CapHit][] =>
    [
      [dayKey(at), plan.dailySendCap, 'daily'] as const,
      [
        monthKey(at),
        plan.includedEmails !== null && plan.overage === 'block' ? plan.includedEmails : null,
        'monthly',
      ] as const,
    ].filter((x): x is [string, number, CapHit] => x[1] !== null);
  /** Adds `n` to the outbound counters of the day and month of `at` (day first, as reservations lock them). */
  const bump = (tx: Tx, userId: string, n: number, at: Date) =>
    tx
      .insert(c)
      .values([dayKey(at), monthKey(at)].map((period) => ({ userId, period, count: n })))
      .onConflictDoUpdate({ target: [c.userId, c.period], set: { count: sql`${c.count} + excluded.count` } });

  return {
    planOf,

    /** Headroom from counters already read (the send path reads them with its other gates). */
    headroomOf: (planName: string, used: { month: number; day: number }) => room(planOf(planName), used),

    /** How many more outbound recipients the plan takes on the day (and in the month) of `at`. */
    async headroom(userId: string, planName: string, at?: number) {
      return room(planOf(planName), await counts(userId, at === undefined ? new Date() : new Date(at)));
    },

    /** The plan's daily cap and blocking monthly bucket (null: none). */
    capsFor(planName: string): { day: number | null; month: number | null } {
      const plan = planOf(planName);
      return { day: plan.dailySendCap, month: plan.overage === 'block' ? plan.includedEmails : null };
    },

    /** True when the plan caps anything (then sends go through `reserve`, else through the cheaper `consume`). */
    capped(planName: string): boolean {
      return capsOf(planOf(planName), new Date()).length > 0;
    },

    /**
     * Counts `n` outbound recipients against the plan's caps of the day and month of `at` (default now),
     * inside the accepting transaction. The capped counters are locked and read first (created at 0 when
     * missing), so concurrent reservations of one account queue there and cannot pass a cap together; the
     * unexpired cap leases of the account (allowance API processes hold, core/gate/cap-lease.ts) count as
     * taken. When they are what stands in the way, they are taken back (deleted: a send from one then fails
     * its check and reserves here instead), so a refusal only ever answers the counters themselves.
     * All or nothing unless `partial`, which grants what fits; answers the grant and the cap that limited it.
     * With `lease` (a send of today), some of the room left after the grant is leased to `lease.holder`.
     */
    async reserve(
      tx: ReserveTx,
      userId: string,
      planName: string,
      n: number,
      opts: { at?: number; partial?: boolean; lease?: { holder: string; ttlMs: number; max: number } } = {},
    ): Promise<{ granted: number; hit: CapHit | null; lease?: LeaseGrant }> {
      if (n <= 0) return { granted: 0, hit: null };
      const at = opts.at === undefined ? new Date() : new Date(opts.at);
      const caps = capsOf(planOf(planName), at);
      let granted = n;
      let hit: CapHit | null = null;
      let lease: LeaseGrant | undefined;
      if (caps.length > 0) {
        // A no-op update takes the row lock (and creates the row if missing): one statement for both counters.
        const used = await tx
          .insert(c)
          .values(caps.map(([period]) => ({ userId, period, count: 0 })))
          .onConflictDoUpdate({ target: [c.userId, c.period], set: { count: sql`${c.count}` } })
          .returning({ period: c.period, count: c.count });
        // Read after the lock (a statement of its own, so it sees every lease granted before it).
        const l = schema.capLeases;
        const [day, month] = [dayKey(at), monthKey(at)];
        const leases = await tx
          .select({ day: l.day, month: l.month, amount: l.amount })
          .from(l)
          .where(and(eq(l.userId, userId), sql`${l.expiresAt} > ${DB_NOW_MS}`));
        const held = (period: string) =>
          leases.filter((x) => x.day === period || x.month === period).reduce((t, x) => t + x.amount, 0);
        const grant = (withLeases: boolean) => {
          let g = n;
          let h: CapHit | null = null;
          let rest = Infinity;
          for (const [period, cap, which] of caps) {
            const left = Math.max(
              0,
              cap - (used.find((u) => u.period === period)?.count ?? 0) - (withLeases ? held(period) : 0),
            );
            if (left < g) [g, h] = [left, which];
            rest = Math.min(rest, left - g);
          }
          return { g, h, rest };
        };
        let r = grant(true);
        if (r.g < n && leases.some((x) => x.amount > 0)) {
          // The leases stand in the way: take them back (and the expired ones with them), then judge the counters.
          await tx.execute(
            sql`delete from ${l} where ${and(eq(l.userId, userId), or(eq(l.day, day), eq(l.month, month)))}`,
          );
          r = grant(false);
        }
        [granted, hit] = [r.g, r.h];
        if (granted < n && !opts.partial) return { granted: 0, hit };
        // Lease a share of what is left (an eighth, so several processes can each hold some, and none near the cap).
        const amount = Math.min(opts.lease?.max ?? 0, Math.floor(r.rest / 8));
        if (opts.lease && opts.at === undefined && granted === n && amount > 0) {
          lease = { id: newId('lease'), userId, day, month, amount };
          await tx.insert(l).values({
            ...lease,
            holder: opts.lease.holder,
            expiresAt: sql`${DB_NOW_MS} + ${opts.lease.ttlMs}::bigint`,
          });
        }
      }
      if (granted > 0) await bump(tx, userId, granted, at);
      return { granted, hit, lease };
    },

    /** Gives back `n` recipients reserved for the day and month of `at` (a scheduled send canceled or refused before it went out). */
    async refund(tx: Pick<Db, 'update'>, userId: string, n: number, at: number): Promise<void> {
      if (n <= 0) return;
      const when = new Date(at);
      await tx
        .update(c)
        .set({ count: sql`greatest(${c.count} - ${n}, 0)` })
        .where(and(eq(c.userId, userId), inArray(c.period, [dayKey(when), monthKey(when)])));
    },

    /** Counts `n` accepted messages, inside the accepting transaction (outbound: only for plans with no cap; see `reserve`). */
    async consume(tx: Tx, userId: string, n: number, opts: { outbound: boolean }): Promise<void> {
      if (n <= 0) return;
      if (opts.outbound) return void (await bump(tx, userId, n, new Date()));
      await billMonth(tx, userId, n);
    },

    async usage(user: { id: string; plan: string }) {
      const plan = planOf(user.plan);
      const used = (await counts(user.id)).month;
      const over = plan.includedEmails !== null && used >= plan.includedEmails;
      const metered = over && plan.overage === 'metered';
      const blocked = over && plan.overage === 'block';
      return {
        plan: user.plan,
        emails: { used, included: plan.includedEmails },
        aiActions: { used: 0 },
        meteringEnabled: plan.overage === 'metered',
        meters: plan.overage === 'metered' ? ['emails'] : [],
        // SPEC.md: `status` is the card-gate status (`ok` lets metered overage through, `failed` blocks); the send refusal carries `code`.
        overage: {
          over,
          metered,
          blocked,
          status: over ? (blocked ? 'failed' : 'ok') : null,
          code: blocked ? OVERAGE_BLOCK_CODE : null,
        },
      };
    },

    async dailyLimitReached(user: { id: string; plan: string }): Promise<boolean> {
      const cap = planOf(user.plan).dailySendCap;
      return cap !== null && (await counts(user.id)).day >= cap;
    },
  };
}
export type UsageService = ReturnType<typeof createUsageService>;

/** One row of the usage counters to add to. */
export type CounterAdd = { userId: string; period: string; count: number };

/**
 * What the outbound recipients of several accounts add to the usage counters at once (the accept writer's
 * group): each account's day and month of now (or those of the lease the recipients came from), summed per
 * (account, period), sends of no recipients left out, in (account, period) order, the order every other
 * writer locks them in, so two groups of two processes cannot deadlock on each other.
 */
export function outboundCounts(
  counts: { userId: string; n: number; day?: string; month?: string }[],
  now = new Date(),
): CounterAdd[] {
  const per = new Map<string, CounterAdd>();
  for (const { userId, n, day, month } of counts) {
    if (n <= 0) continue;
    for (const period of [day ?? dayKey(now), month ?? monthKey(now)]) {
      const key = `${userId} ${period}`;
      const row = per.get(key) ?? per.set(key, { userId, period, count: 0 }).get(key)!;
      row.count += n;
    }
  }
  return [...per.values()].sort((a, b) =>
    a.userId === b.userId ? (a.period < b.period ? -1 : 1) : a.userId < b.userId ? -1 : 1,
  );
}
