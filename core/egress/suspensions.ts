import { asc, gt } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { DEFAULT_SOURCE, type EgressConfig } from './config.js';

export type Suspension = { site: string; until: number; cause: string };
export type AssignStream = 'all' | 'transactional' | 'bulk';

/**
 * The sites each source is suspended at now, from the shaping state (`shaping_sites`): a source's key is
 * `<source>|<site>`, the default source's the bare site key (core/egress/config.ts `sourceSiteKey`).
 */
export async function suspensionsBySource(db: Db, now = Date.now()): Promise<Map<string, Suspension[]>> {
  const s = schema.shapingSites;
  const rows = await db
    .select({ site: s.site, until: s.suspendedUntil, cause: s.suspendCause })
    .from(s)
    .where(gt(s.suspendedUntil, now))
    .orderBy(asc(s.site))
    .limit(10_000);
  const out = new Map<string, Suspension[]>();
  for (const r of rows) {
    const bar = r.site.indexOf('|');
    const source = bar < 0 ? DEFAULT_SOURCE : r.site.slice(0, bar);
    const site = bar < 0 ? r.site : r.site.slice(bar + 1);
    out.set(source, [...(out.get(source) ?? []), { site, until: r.until!, cause: r.cause ?? '' }]);
  }
  return out;
}

/**
 * What GET and POST /api/domains say about the pool backing a domain: a pool no longer in the egress file
 * (its mail leaves as if unpinned), or a source of it suspended at some sites (which, how many, until when).
 */
export async function poolWarnings(db: Db, egress: EgressConfig, pool: string): Promise<string[]> {
  const found = egress.pools.get(pool);
  if (!found)
    return [
      `Pool "${pool}" is no longer in the egress file: the domain's mail leaves as if unpinned (the account's pool or its stream's)`,
    ];
  const suspended = await suspensionsBySource(db);
  return found.sources.flatMap(({ source }) => {
    const list = suspended.get(source) ?? [];
    if (list.length === 0) return [];
    const until = new Date(Math.max(...list.map((x) => x.until))).toISOString();
    return [
      `Source "${source}" of pool "${pool}" is suspended at ${list.length} site(s) (${list
        .slice(0, 3)
        .map((x) => x.site)
        .join(
          ', ',
        )}${list.length > 3 ? ', …' : ''}) until ${until}: that mail goes to the pool's other sources or waits`,
    ];
  });
}
