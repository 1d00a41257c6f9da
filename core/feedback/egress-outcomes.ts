import { and, eq, gte, lt, sql, type SQL } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { badRequest } from '../errors.js';
import type { Actor } from '../tenancy.js';
import type { DomainService } from '../domains/service.js';
import { EGRESS_RESULTS, HOUR, hourOf, type EgressResult } from '../egress/counters.js';

export type EgressOutcomeRow = { source: string; pool: string } & Record<EgressResult, number>;
export type EgressOutcomes = {
  from: number;
  to: number;
  rows: EgressOutcomeRow[];
  totals: Record<EgressResult, number>;
};

/** The widest range one answer sums (a year and a bit): the hour index bounds the scan. */
export const MAX_RANGE_MS = 400 * 24 * HOUR;

/**
 * Reads the counters: an account's (or one domain's) outcomes per source and pool, loaded through the
 * actor, and the operator's view over every account. One grouped query each.
 */
export function createEgressOutcomes(deps: { db: Db; domains: Pick<DomainService, 'load'> }) {
  const t = schema.egressCounters;
  async function sum(where: SQL | undefined, from: number, to: number): Promise<EgressOutcomes> {
    const rows = await deps.db
      .select({
        source: t.source,
        pool: t.pool,
        sent: sql<number>`sum(${t.sent})`.mapWith(Number),
        deferred: sql<number>`sum(${t.deferred})`.mapWith(Number),
        bounced: sql<number>`sum(${t.bounced})`.mapWith(Number),
      })
      .from(t)
      .where(and(where, gte(t.hour, from), lt(t.hour, to)))
      .groupBy(t.source, t.pool)
      .orderBy(t.source, t.pool);
    const totals = { sent: 0, deferred: 0, bounced: 0 };
    for (const r of rows) for (const k of EGRESS_RESULTS) totals[k] += r[k];
    return { from, to, rows, totals };
  }
  /** `[from, to)` in whole hours: `to` defaults to the end of this hour, `from` to 24 hours before it. */
  function range(q: { from?: number; to?: number }, now: number): { from: number; to: number } {
    const to = q.to !== undefined ? hourOf(q.to) + HOUR : hourOf(now) + HOUR;
    const from = q.from !== undefined ? hourOf(q.from) : to - 24 * HOUR;
    if (from >= to) throw badRequest('from must be before to', 'validation_error');
    if (to - from > MAX_RANGE_MS)
      throw badRequest('at most 400 days in one answer: narrow from/to', 'validation_error');
    return { from, to };
  }
  return {
    /** GET /api/metrics/egress: the actor's account, or one domain (a scoped key: its own). */
    async forActor(actor: Actor, q: { from?: number; to?: number; domainId?: string }, now = Date.now()) {
      const { from, to } = range(q, now);
      if (q.domainId) await deps.domains.load(actor, q.domainId);
      const domainId = q.domainId ?? actor.domainId;
      const out = await sum(and(eq(t.userId, actor.userId), ...(domainId ? [eq(t.domainId, domainId)] : [])), from, to);
      return { ...out, domain_id: domainId ?? null };
    },
    /** GET /api/operator/egress/outcomes: every account's mail (system mail included) over the last `hours`. */
    async overall(hours: number, now = Date.now()) {
      const to = hourOf(now) + HOUR;
      return { hours, ...(await sum(undefined, to - hours * HOUR, to)) };
    },
  };
}
export type EgressOutcomeService = ReturnType<typeof createEgressOutcomes>;
