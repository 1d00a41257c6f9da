import { and, desc, eq, gt, lte, sql } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { newId } from '../ids.js';

const s = schema.shapingSites;
const leases = schema.shapingLeases;
const actions = schema.shapingActions;
type Row = Record<string, unknown>;
const rowsOf = (r: unknown): Row[] => (r as { rows?: Row[] }).rows ?? (r as Row[]);
const num = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v));

/** What a site row says about admission: the suspension in force and the SetConfig overrides. */
export type SiteState = {
  suspendedUntil: number | null;
  suspendCause: string | null;
  overrides: Record<string, { value: string; until: number; cause: string }>;
};

/**
 * Shaping state in PostgreSQL, shared by every worker process (DESIGN.md, Deliverability): the token
 * buckets and suspension of each site, connection leases that expire (a crashed worker's slots come
 * back), and the log of what automation rules did. Every statement is one round trip except taking
 * a lease, which serializes on the site row.
 */
export function createShapingStore(db: Db) {
  return {
    /** Creates the site row (buckets full) or refreshes what it lists: its effective limits and a few of its domains. */
    async touch(
      site: string,
      limits: Record<string, unknown>,
      domain: string,
      bursts: { message: number; connection: number },
      now = Date.now(),
    ): Promise<void> {
      await db
        .insert(s)
        .values({
          site,
          msgTokens: bursts.message,
          msgAt: now,
          connTokens: bursts.connection,
          connAt: now,
          limits,
          domains: [domain],
          updatedAt: now,
        })
        .onConflictDoUpdate({
          target: s.site,
          set: {
            limits,
            updatedAt: now,
            domains: sql`case when ${s.domains} ? ${domain} or jsonb_array_length(${s.domains}) >= 20 then ${s.domains} else ${s.domains} || jsonb_build_array(${domain}::text) end`,
          },
        });
    },

    /**
     * Takes one message token unless the site is suspended or its bucket (refilled at `rate`/s up to
     * `burst`) has none. Answers whether it was taken, the tokens there were, and the site's state.
     */
    async takeMessage(
      site: string,
      rate: number,
      burst: number,
      now = Date.now(),
    ): Promise<{ taken: boolean; tokens: number } & SiteState> {
      const rows = rowsOf(
        await db.execute(sql`
        with cur as (
          select site, least(${burst}::float8, msg_tokens + greatest(0, ${now}::bigint - msg_at) * ${rate / 1000}::float8) as t,
                 coalesce(suspended_until, 0) > ${now}::bigint as suspended
          from shaping_sites where site = ${site} for update
        )
        update shaping_sites x set msg_tokens = case when cur.t >= 1 and not cur.suspended then cur.t - 1 else cur.t end, msg_at = ${now}::bigint
        from cur where x.site = cur.site
        returning cur.t as tokens, (cur.t >= 1 and not cur.suspended) as taken, x.suspended_until, x.suspend_cause, x.overrides`),
      );
      const r = rows[0];
      if (!r) return { taken: true, tokens: burst, suspendedUntil: null, suspendCause: null, overrides: {} };
      return { taken: Boolean(r.taken), tokens: Number(r.tokens), ...stateOf(r) };
    },

    /** Gives back a message token taken for a message that then could not go (no connection slot). */
    async refundMessage(site: string, burst: number): Promise<void> {
      await db
        .update(s)
        .set({ msgTokens: sql`least(${burst}::float8, ${s.msgTokens} + 1)` })
        .where(eq(s.site, site));
    },

    async state(site: string): Promise<SiteState> {
      const [r] = await db
        .select({ suspended_until: s.suspendedUntil, suspend_cause: s.suspendCause, overrides: s.overrides })
        .from(s)
        .where(eq(s.site, site));
      return r ? stateOf(r) : { suspendedUntil: null, suspendCause: null, overrides: {} };
    },

    /**
     * A connection slot: a lease while fewer than `limit` unexpired leases are held on the site and, with
     * a connection rate, a connection token is there. Serialized on the site row, so two workers never
     * both take the last slot. Answers the lease id, or how long to wait before asking again.
     */
    async acquireLease(
      site: string,
      opts: { holder: string; limit: number; rate: number | null; burst: number; ttlMs: number },
      now = Date.now(),
    ): Promise<{ id: string } | { waitMs: number; why: string }> {
      return db.transaction(async (tx) => {
        const [row] = await tx.select().from(s).where(eq(s.site, site)).for('update');
        if (row && (row.suspendedUntil ?? 0) > now)
          return { waitMs: row.suspendedUntil! - now, why: `suspended: ${row.suspendCause ?? ''}` };
        await tx.delete(leases).where(and(eq(leases.site, site), lte(leases.expiresAt, now)));
        const [{ n }] = (await tx
          .select({ n: sql<number>`count(*)::int` })
          .from(leases)
          .where(eq(leases.site, site))) as [{ n: number }];
        if (n >= opts.limit) return { waitMs: 1000, why: `connection_limit ${opts.limit} reached` };
        if (opts.rate && row) {
          const tokens = Math.min(opts.burst, row.connTokens + Math.max(0, now - row.connAt) * (opts.rate / 1000));
          if (tokens < 1)
            return { waitMs: Math.ceil(((1 - tokens) / opts.rate) * 1000), why: 'max_connection_rate reached' };
          await tx
            .update(s)
            .set({ connTokens: tokens - 1, connAt: now })
            .where(eq(s.site, site));
        }
        const id = newId('lease');
        await tx.insert(leases).values({ id, site, holder: opts.holder, expiresAt: now + opts.ttlMs });
        return { id };
      });
    },

    /** Extends a lease; false when it expired and was taken back (its connection must close). */
    async renewLease(id: string, expiresAt: number): Promise<boolean> {
      const r = await db.update(leases).set({ expiresAt }).where(eq(leases.id, id)).returning({ id: leases.id });
      return r.length > 0;
    },

    async releaseLease(id: string): Promise<void> {
      await db.delete(leases).where(eq(leases.id, id));
    },

    /** Suspends the site until `until` (a longer suspension in force stays), recorded with its cause. */
    async suspend(site: string, until: number, rule: string, cause: string, now = Date.now()): Promise<void> {
      await db
        .update(s)
        .set({
          suspendedUntil: sql`greatest(coalesce(${s.suspendedUntil}, 0), ${until}::bigint)`,
          suspendCause: sql`case when coalesce(${s.suspendedUntil}, 0) > ${until}::bigint then ${s.suspendCause} else ${cause} end`,
          updatedAt: now,
        })
        .where(eq(s.site, site));
      await db
        .insert(actions)
        .values({ id: newId('shp'), site, action: 'Suspend', rule, cause, createdAt: now, expiresAt: until });
    },

    /** A SetConfig action: the limit takes `value` on the site until `until`, recorded with its cause. */
    async setOverride(
      site: string,
      name: string,
      value: string,
      until: number,
      rule: string,
      cause: string,
      now = Date.now(),
    ): Promise<void> {
      const o = JSON.stringify({ [name]: { value, until, cause } });
      await db
        .update(s)
        .set({ overrides: sql`${s.overrides} || ${o}::jsonb`, updatedAt: now })
        .where(eq(s.site, site));
      await db.insert(actions).values({
        id: newId('shp'),
        site,
        action: `SetConfig ${name}=${value}`,
        rule,
        cause,
        createdAt: now,
        expiresAt: until,
      });
    },

    /** Every known site with its open connections and the actions in force (GET /api/deliverability/sites). */
    async list(now = Date.now()) {
      const sites = await db.select().from(s).orderBy(desc(s.updatedAt)).limit(500);
      const open = await db
        .select({ site: leases.site, n: sql<number>`count(*)::int` })
        .from(leases)
        .where(gt(leases.expiresAt, now))
        .groupBy(leases.site);
      const active = await db
        .select()
        .from(actions)
        .where(gt(actions.expiresAt, now))
        .orderBy(desc(actions.createdAt))
        .limit(1000);
      const recent = await db.select().from(actions).orderBy(desc(actions.createdAt)).limit(50);
      return { sites, open: new Map(open.map((o) => [o.site, Number(o.n)])), active, recent };
    },
  };
}
export type ShapingStore = ReturnType<typeof createShapingStore>;

function stateOf(r: Row): SiteState {
  return {
    suspendedUntil: num(r.suspended_until),
    suspendCause: (r.suspend_cause as string | null) ?? null,
    overrides: (r.overrides as SiteState['overrides']) ?? {},
  };
}
