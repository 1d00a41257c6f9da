import { and, eq, gte, sql } from 'drizzle-orm';
import type { Db } from '../db/index.js';
import { schema } from '../db/index.js';
import type { Plan } from './plans.js';

/** Start of the current UTC calendar month / day, ms epoch. */
export const monthStart = (now = new Date()) => Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1);
export const dayStart = (now = new Date()) => Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate());

/** Usage against the plan: the monthly bucket (inbound and outbound share it) and the daily send cap. */
export function createUsageService(deps: { db: Db; plans: Record<string, Plan>; defaultPlan: string }) {
  const { db } = deps;
  const planOf = (name: string): Plan => deps.plans[name] ?? deps.plans[deps.defaultPlan]!;

  async function countSince(userId: string, since: number, direction?: 'outbound'): Promise<number> {
    const [row] = await db.select({ n: sql<string>`count(*)` }).from(schema.messages).where(and(
      eq(schema.messages.userId, userId), eq(schema.messages.kind, 'user'), gte(schema.messages.createdAt, since),
      ...(direction ? [eq(schema.messages.direction, direction)] : []),
    ));
    return Number(row?.n ?? 0);
  }

  return {
    planOf,
    async usage(user: { id: string; plan: string }) {
      const plan = planOf(user.plan);
      const used = await countSince(user.id, monthStart());
      const over = plan.includedEmails !== null && used >= plan.includedEmails;
      const metered = over && plan.overage === 'metered';
      const blocked = over && plan.overage === 'block';
      return {
        plan: user.plan,
        emails: { used, included: plan.includedEmails },
        aiActions: { used: 0 },
        meteringEnabled: plan.overage === 'metered',
        meters: plan.overage === 'metered' ? ['emails'] : [],
        overage: {
          over, metered, blocked,
          status: over ? (blocked ? 'blocked' : 'ok') : null,
          code: blocked ? 'monthly_quota_exceeded' : null,
        },
      };
    },
    async dailyLimitReached(user: { id: string; plan: string }): Promise<boolean> {
      const cap = planOf(user.plan).dailySendCap;
      return cap !== null && (await countSince(user.id, dayStart(), 'outbound')) >= cap;
    },
  };
}
export type UsageService = ReturnType<typeof createUsageService>;
