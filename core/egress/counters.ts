import { and, eq, gte, lt, sql, type SQL } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { badRequest } from '../errors.js';
import { log } from '../log.js';
import type { Actor } from '../tenancy.js';
import type { DomainService } from '../domains/service.js';

/**
 * SMTP outcomes per account, domain, egress source, pool and hour (docs/deliverability.md, "Outcomes by
 * source and pool"): counted in memory as results come back from the transport and written to
 * egress_counters with one multi-row upsert every few seconds and on close, never one statement per
 * message (the pattern of core/shaping/tls-outcomes.ts). A crash loses at most the last few seconds.
 */
export const EGRESS_RESULTS = ['sent', 'deferred', 'bounced'] as const;
export type EgressResult = (typeof EGRESS_RESULTS)[number];
export type EgressOwner = { userId: string | null; domainId: string | null };

export type EgressCounter = {
  /** One recipient's outcome; system mail (no account) is kept under user_id '' for the operator's totals. */
  count(owner: EgressOwner | undefined, source: string, pool: string, result: EgressResult): void;
  /** Writes what is counted so far; also runs every `flushMs` and on close. */
  flush(): Promise<void>;
  close(): Promise<void>;
};

const HOUR = 3_600_000;
export const hourOf = (at: number) => Math.floor(at / HOUR) * HOUR;

/** The worker's counter (worker.ts hands it to instrumentTransport). */
export function createEgressCounter(deps: { db: Db; flushMs?: number }): EgressCounter {
  type Row = typeof schema.egressCounters.$inferInsert & Record<EgressResult, number>;
  const t = schema.egressCounters;
  let pending = new Map<string, Row>();
  let writing: Promise<void> = Promise.resolve();

  function add(r: Row): void {
    const key = [r.userId, r.domainId, r.source, r.pool, r.hour].join('\n');
    const hit = pending.get(key);
    if (!hit) return void pending.set(key, { ...r });
    for (const k of EGRESS_RESULTS) hit[k] += r[k];
  }
  async function write(rows: Row[]): Promise<void> {
    if (!rows.length) return;
    await deps.db
      .insert(t)
      .values(rows)
      .onConflictDoUpdate({
        target: [t.userId, t.domainId, t.source, t.pool, t.hour],
        set: {
          sent: sql`${t.sent} + excluded.sent`,
          deferred: sql`${t.deferred} + excluded.deferred`,
          bounced: sql`${t.bounced} + excluded.bounced`,
        },
      });
  }
  function flush(): Promise<void> {
    const rows = [...pending.values()];
    pending = new Map();
    // One write at a time, in order; a failed write puts its counts back for the next flush.
    writing = writing.then(() =>
      write(rows).catch((err: Error) => {
        log.warn({ error: err.message }, '[egress] could not record outcomes by source; kept for the next flush');
        for (const r of rows) add(r);
      }),
    );
    return writing;
  }
  const timer = setInterval(() => void flush(), deps.flushMs ?? 5_000);
  timer.unref();
  return {
    count(owner, source, pool, result) {
      add({
        userId: owner?.userId ?? '',
        domainId: owner?.domainId ?? '',
        source,
        pool,
        hour: hourOf(Date.now()),
        sent: result === 'sent' ? 1 : 0,
        deferred: result === 'deferred' ? 1 : 0,
        bounced: result === 'bounced' ? 1 : 0,
      });
    },
    flush,
    async close() {
      clearInterval(timer);
      await flush();
    },
  };
}

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
