import { and, eq, gte, lt, sql } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { badRequest } from '../errors.js';
import type { Actor } from '../tenancy.js';
import type { DomainService } from '../domains/service.js';

/** The metrics activity_counters keeps (migration 0022), in the order the overview draws them. */
export const ACTIVITY_METRICS = [
  'sent',
  'delivered',
  'deferred',
  'bounced',
  'complained',
  'opened',
  'clicked',
] as const;
export type ActivityMetric = (typeof ACTIVITY_METRICS)[number];
export type ActivityPeriod = 'hour' | 'day';
export type ActivityCounts = Record<ActivityMetric, number> & { bounced_by_class: Record<string, number> };
export type ActivityBucket = ActivityCounts & { t: number };
export type ActivityQuery = { period?: ActivityPeriod; from?: number; to?: number; domainId?: string };

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
/** Bucket sizes, and how many buckets the default range spans (30 days, 48 hours). */
const PERIODS = { hour: { size: HOUR, fallback: 48 }, day: { size: DAY, fallback: 30 } } as const;
/** The most buckets one answer holds (2,000 hours is 83 days; 2,000 days 5 years). */
export const MAX_BUCKETS = 2_000;

const zero = (): ActivityCounts => ({
  sent: 0,
  delivered: 0,
  deferred: 0,
  bounced: 0,
  complained: 0,
  opened: 0,
  clicked: 0,
  bounced_by_class: {},
});

/** Adds one counter row into a bucket; a metric the table learns later than this code is skipped, not thrown. */
function add(into: ActivityCounts, metric: string, detail: string, n: number): void {
  if (!(ACTIVITY_METRICS as readonly string[]).includes(metric)) return;
  into[metric as ActivityMetric] += n;
  if (metric === 'bounced') {
    const cls = detail || 'other';
    into.bounced_by_class[cls] = (into.bounced_by_class[cls] ?? 0) + n;
  }
}

/** The UTC-aligned buckets `[first, last]` a query covers: defaults, order and the bucket bound checked. */
export function bucketRange(q: ActivityQuery, now = Date.now()) {
  const period = q.period ?? 'day';
  const { size, fallback } = PERIODS[period];
  const last = Math.floor((q.to ?? now) / size) * size;
  const first = q.from !== undefined ? Math.floor(q.from / size) * size : last - (fallback - 1) * size;
  if (first > last) throw badRequest('from must not be after to', 'validation_error');
  const buckets = (last - first) / size + 1;
  if (buckets > MAX_BUCKETS)
    throw badRequest(
      `${buckets} ${period} buckets asked; at most ${MAX_BUCKETS} in one answer: narrow from/to or use period=day`,
      'validation_error',
    );
  return { period, size, first, last };
}

/**
 * GET /api/metrics: an account's (or one domain's) mail activity per hour or day, read from the counters the
 * triggers on messages and events keep as mail flows: one grouped query on activity_counters, never a scan
 * of messages. A domain is loaded through the actor (another account's, or another domain for a scoped key, is 404).
 */
export function createActivityService(deps: { db: Db; domains: Pick<DomainService, 'load'> }) {
  const a = schema.activityCounters;
  return {
    async series(actor: Actor, q: ActivityQuery, now = Date.now()) {
      const { period, size, first, last } = bucketRange(q, now);
      if (q.domainId) await deps.domains.load(actor, q.domainId);
      const domainId = q.domainId ?? actor.domainId;
      // The bucket size is this module's constant, written into the statement (one plan per period).
      const bucket = sql<number>`(${a.hour} / ${sql.raw(String(size))}) * ${sql.raw(String(size))}`.mapWith(Number);
      const rows = await deps.db
        .select({ t: bucket, metric: a.metric, detail: a.detail, n: sql<number>`sum(${a.count})`.mapWith(Number) })
        .from(a)
        .where(
          and(
            eq(a.userId, actor.userId),
            ...(domainId ? [eq(a.domainId, domainId)] : []),
            gte(a.hour, first),
            lt(a.hour, last + size),
          ),
        )
        .groupBy(sql`1`, a.metric, a.detail);
      const series: ActivityBucket[] = [];
      for (let t = first; t <= last; t += size) series.push({ t, ...zero() });
      const totals = zero();
      for (const r of rows) {
        const b = series[(r.t - first) / size];
        if (!b) continue;
        add(b, r.metric, r.detail, r.n);
        add(totals, r.metric, r.detail, r.n);
      }
      return { period, from: first, to: last + size, domain_id: domainId ?? null, series, totals };
    },
  };
}
export type ActivityService = ReturnType<typeof createActivityService>;
