import { sql } from 'drizzle-orm';
import type { Db, schema } from '../../db/index.js';
import { log } from '../log.js';

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

export const HOUR = 3_600_000;
export const hourOf = (at: number) => Math.floor(at / HOUR) * HOUR;

/** The worker's counter (worker.ts hands it to instrumentTransport). */
export function createEgressCounter(deps: { db: Db; flushMs?: number }): EgressCounter {
  type Row = typeof schema.egressCounters.$inferInsert & Record<EgressResult, number>;
  let pending = new Map<string, Row>();
  let writing: Promise<void> = Promise.resolve();

  function add(r: Row): void {
    const key = [r.userId, r.domainId, r.source, r.pool, r.hour].join('\n');
    const hit = pending.get(key);
    if (!hit) return void pending.set(key, { ...r });
    for (const k of EGRESS_RESULTS) hit[k] += r[k];
  }
  /**
   * One multi-row upsert. Counts of an account removed since they were counted are dropped (the removal has
   * deleted its rows; a late flush must not bring them back); system mail (user_id '') is always kept.
   */
  async function write(rows: Row[]): Promise<void> {
    if (!rows.length) return;
    const values = sql.join(
      rows.map(
        (r) =>
          sql`(${r.userId}, ${r.domainId}, ${r.source}, ${r.pool}, ${r.hour}::bigint, ${r.sent}::int, ${r.deferred}::int, ${r.bounced}::int)`,
      ),
      sql`, `,
    );
    await deps.db.execute(sql`
      insert into egress_counters (user_id, domain_id, source, pool, hour, sent, deferred, bounced)
      select v.* from (values ${values}) as v(user_id, domain_id, source, pool, hour, sent, deferred, bounced)
      where v.user_id = '' or exists (select 1 from users u where u.id = v.user_id)
      on conflict (user_id, domain_id, source, pool, hour) do update set
        sent = egress_counters.sent + excluded.sent,
        deferred = egress_counters.deferred + excluded.deferred,
        bounced = egress_counters.bounced + excluded.bounced`);
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
