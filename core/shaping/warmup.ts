import { and, eq, sql } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { notFound } from '../errors.js';
import { ownedBy, type Actor } from '../tenancy.js';
import type { Throttled } from './connections.js';
import type { WarmupWorkflows } from '../ports/domains.js';
import { createReadCache } from './read-cache.js';

const plans = schema.warmupPlans;
const counts = schema.warmupCounts;
type Plan = typeof plans.$inferSelect;

/** Twelve days from 50 to 100,000 messages per site a day, then no warm-up limit. */
export const DEFAULT_WARMUP_SCHEDULE = [50, 100, 200, 400, 800, 1500, 3000, 6000, 12_000, 25_000, 50_000, 100_000];
const PLAN_CACHE_MS = 1000;

/** Where a plan stands, as `GET /api/domains/:id` shows it (`domain.warmup`). */
export type WarmupView = {
  status: 'warming' | 'done';
  day: number;
  days: number;
  dailyLimit: number | null;
  schedule: number[];
  startedAt: number;
  nextDayAt: number | null;
  completedAt: number | null;
  sentToday: Record<string, number>;
  workflowId: string;
};
/** Per-message check of a warming domain's daily volume to one site (the transport calls it with the site). */
export type WarmupGate = { take(site: string): Promise<true | Throttled>; giveBack(site: string): Promise<void> };

export const warmupWorkflowId = (domainId: string) => `warmup-${domainId}`;

/**
 * Domain warm-up (issue 24): a plan gives a sending domain a daily volume per destination site that
 * grows on a schedule. Mail past the day's volume to a site is throttled until the next day (it waits
 * on its run's timer, it does not fail). One workflow per warming domain moves the plan's day.
 */
/** Loads a domain the actor may see (404 otherwise): the domain service's `load`. */
export type DomainLoader = { load(actor: Actor, domainId: string): Promise<{ userId: string }> };

export function createWarmupService(deps: {
  db: Db;
  domains?: DomainLoader;
  dayMs: number;
  workflows?: WarmupWorkflows;
}) {
  const { db } = deps;
  // Each domain's plan as this process last read it (lanes share a read when it is stale).
  const planCache = createReadCache<string, Plan | undefined>({
    ttlMs: PLAN_CACHE_MS,
    load: async (domainId) => (await db.select().from(plans).where(eq(plans.domainId, domainId)))[0],
  });
  const planOf = (domainId: string) => planCache.get(domainId);

  async function view(plan: Plan): Promise<WarmupView> {
    const done = plan.completedAt !== null;
    const rows = done
      ? []
      : await db
          .select()
          .from(counts)
          .where(and(eq(counts.domainId, plan.domainId), eq(counts.day, plan.day)));
    return {
      status: done ? 'done' : 'warming',
      day: plan.day + 1,
      days: plan.schedule.length,
      dailyLimit: done ? null : (plan.schedule[plan.day] ?? null),
      schedule: plan.schedule,
      startedAt: plan.startedAt,
      nextDayAt: done ? null : plan.dayStartedAt + plan.dayMs,
      completedAt: plan.completedAt,
      sentToday: Object.fromEntries(rows.map((r) => [r.site, r.sent])),
      workflowId: warmupWorkflowId(plan.domainId),
    };
  }

  return {
    /** Starts (or restarts from day 1) the plan of a domain the actor may see; answers where it stands. */
    async start(actor: Actor, domainId: string, input: { schedule?: number[] }): Promise<{ warmup: WarmupView }> {
      const domain = await deps.domains!.load(actor, domainId);
      const schedule = input.schedule ?? DEFAULT_WARMUP_SCHEDULE;
      const now = Date.now();
      const values = {
        domainId,
        userId: domain.userId,
        schedule,
        dayMs: deps.dayMs,
        day: 0,
        startedAt: now,
        dayStartedAt: now,
        completedAt: null,
      };
      await deps.workflows!.stopWarmup(domainId);
      await db.delete(counts).where(eq(counts.domainId, domainId));
      const [plan] = await db
        .insert(plans)
        .values(values)
        .onConflictDoUpdate({ target: plans.domainId, set: values })
        .returning();
      await deps.workflows!.startWarmup({ domainId, userId: domain.userId, days: schedule.length, dayMs: deps.dayMs });
      return { warmup: await view(plan!) };
    },

    /** Ends a domain's plan: its mail is no longer held to a daily volume. */
    async stop(actor: Actor, domainId: string): Promise<{ ok: true }> {
      await deps.domains!.load(actor, domainId);
      const removed = await db.delete(plans).where(eq(plans.domainId, domainId)).returning();
      if (!removed.length) throw notFound('This domain has no warm-up plan', 'not_found');
      await db.delete(counts).where(eq(counts.domainId, domainId));
      await deps.workflows!.stopWarmup(domainId);
      return { ok: true };
    },

    /** Where the plan of a domain the actor may see stands (null: no plan, or not the actor's). */
    async viewOf(actor: Actor, domainId: string): Promise<WarmupView | null> {
      const [plan] = await db
        .select()
        .from(plans)
        .where(and(eq(plans.domainId, domainId), ownedBy(actor, plans)));
      return plan ? view(plan) : null;
    },

    /** The per-site gate of a domain's mail today; undefined when it is not warming. */
    async gateFor(domainId: string): Promise<WarmupGate | undefined> {
      const plan = await planOf(domainId);
      if (!plan || plan.completedAt !== null) return undefined;
      const { day } = plan;
      const cap = plan.schedule[day] ?? Infinity;
      const nextDayAt = plan.dayStartedAt + plan.dayMs;
      return {
        async take(site) {
          // One statement: count the message if the day's volume to this site has room.
          const taken = await db
            .insert(counts)
            .values({ domainId, site, day, sent: 1 })
            .onConflictDoUpdate({
              target: [counts.domainId, counts.site, counts.day],
              set: { sent: sql`${counts.sent} + 1` },
              setWhere: sql`${counts.sent} < ${cap}`,
            })
            .returning({ sent: counts.sent });
          if (taken.length && taken[0]!.sent <= cap) return true;
          return {
            throttled: true,
            site,
            waitMs: Math.max(500, nextDayAt - Date.now()),
            cause: `warm-up day ${day + 1}: ${cap} messages to this site reached`,
          };
        },
        async giveBack(site) {
          await db
            .update(counts)
            .set({ sent: sql`greatest(0, ${counts.sent} - 1)` })
            .where(and(eq(counts.domainId, domainId), eq(counts.site, site), eq(counts.day, day)));
        },
      };
    },

    /** The workflow's step: day `day` (0-based) begins now. */
    async advance(domainId: string, day: number): Promise<boolean> {
      const r = await db
        .update(plans)
        .set({ day, dayStartedAt: Date.now() })
        .where(and(eq(plans.domainId, domainId), sql`${plans.day} <= ${day}`))
        .returning({ d: plans.domainId });
      planCache.forget(domainId);
      return r.length > 0;
    },

    /** The workflow's end: the plan is done, the domain's mail goes at the shaped rate alone. */
    async finish(domainId: string): Promise<void> {
      await db.update(plans).set({ completedAt: Date.now() }).where(eq(plans.domainId, domainId));
      await db.delete(counts).where(eq(counts.domainId, domainId));
      planCache.forget(domainId);
    },
  };
}
export type WarmupService = ReturnType<typeof createWarmupService>;
