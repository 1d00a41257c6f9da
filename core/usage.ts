import { and, eq, inArray, sql } from 'drizzle-orm';
import type { Db } from '../db/index.js';
import { schema } from '../db/index.js';
import type { Plan } from './plans.js';

const iso = (now: Date) => now.toISOString();
export const monthKey = (now = new Date()) => `m:${iso(now).slice(0, 7)}`;
export const dayKey = (now = new Date()) => `d:${iso(now).slice(0, 10)}`;
/** Seconds until the next UTC midnight, for Retry-After on the daily cap. */
export const secondsToMidnight = (now = new Date()) =>
  Math.max(1, Math.ceil((Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1) - now.getTime()) / 1000));

type Tx = Pick<Db, 'insert'>;
/** Which cap refused a reservation. */
export type CapHit = 'daily' | 'monthly';
const room = (plan: Plan, used: { month: number; day: number }) => ({
  daily: plan.dailySendCap === null ? Infinity : Math.max(0, plan.dailySendCap - used.day),
  monthly: plan.includedEmails === null || plan.overage !== 'block' ? Infinity : Math.max(0, plan.includedEmails - used.month),
});

/**
 * Usage against the plan: the monthly bucket (inbound and outbound share it) and the daily send cap,
 * kept as counters bumped in the same transaction that accepts the mail.
 */
export function createUsageService(deps: { db: Db; plans: Record<string, Plan>; defaultPlan: string }) {
  const { db } = deps;
  const c = schema.usageCounters;
  const planOf = (name: string): Plan => deps.plans[name] ?? deps.plans[deps.defaultPlan]!;

  async function counts(userId: string): Promise<{ month: number; day: number }> {
    const rows = await db.select().from(c).where(and(eq(c.userId, userId), inArray(c.period, [monthKey(), dayKey()])));
    return { month: rows.find((r) => r.period === monthKey())?.count ?? 0, day: rows.find((r) => r.period === dayKey())?.count ?? 0 };
  }

  return {
    planOf,

    /** How many more messages may be accepted now: by the daily cap and by a blocking monthly bucket. */
    /** Headroom from counters already read (the send path reads them with its other gates). */
    headroomOf: (planName: string, used: { month: number; day: number }) => room(planOf(planName), used),

    /** True when the plan caps anything (then sends go through `reserve`, else through the cheaper `consume`). */
    capped(planName: string): boolean {
      const plan = planOf(planName);
      return plan.dailySendCap !== null || (plan.includedEmails !== null && plan.overage === 'block');
    },

    /**
     * Counts `n` recipients against the plan's caps inside the accepting transaction, atomically: each
     * capped counter is bumped by a conditional upsert that applies only while it stays within the cap,
     * so concurrent sends cannot pass it together. Answers the cap that refused (caller rolls back), or null.
     */
    async reserve(tx: Tx, userId: string, planName: string, n: number): Promise<CapHit | null> {
      if (n <= 0) return null;
      const plan = planOf(planName);
      const caps: [string, number | null, CapHit][] = [
        [dayKey(), plan.dailySendCap, 'daily'],
        [monthKey(), plan.includedEmails !== null && plan.overage === 'block' ? plan.includedEmails : null, 'monthly'],
      ];
      for (const [period, cap, hit] of caps) {
        if (cap !== null && n > cap) return hit;
        const bumped = await tx.insert(c).values({ userId, period, count: n }).onConflictDoUpdate({
          target: [c.userId, c.period], set: { count: sql`${c.count} + excluded.count` },
          ...(cap !== null ? { setWhere: sql`${c.count} + excluded.count <= ${cap}` } : {}),
        }).returning({ count: c.count });
        if (bumped.length === 0) return hit;
      }
      return null;
    },

    /** Counts `n` accepted messages, inside the accepting transaction. */
    async consume(tx: Tx, userId: string, n: number, opts: { outbound: boolean }): Promise<void> {
      if (n <= 0) return;
      const periods = opts.outbound ? [monthKey(), dayKey()] : [monthKey()];
      await tx.insert(c).values(periods.map((period) => ({ userId, period, count: n })))
        .onConflictDoUpdate({ target: [c.userId, c.period], set: { count: sql`${c.count} + excluded.count` } });
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
        overage: { over, metered, blocked, status: over ? (blocked ? 'blocked' : 'ok') : null, code: blocked ? 'monthly_quota_exceeded' : null },
      };
    },

    async dailyLimitReached(user: { id: string; plan: string }): Promise<boolean> {
      const cap = planOf(user.plan).dailySendCap;
      return cap !== null && (await counts(user.id)).day >= cap;
    },
  };
}
export type UsageService = ReturnType<typeof createUsageService>;
