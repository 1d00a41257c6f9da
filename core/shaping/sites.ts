import type { Entry, Limits, Rule, ShapingConfig } from './config.js';
import { parseLimit, type LimitName } from './config.js';
import type { SiteState } from './store.js';

/** A destination site: its key, the limits the file gives it, the rules that watch it, and which tables those came from. */
export type Site = {
  key: string;
  domain: string;
  hosts: string[];
  limits: Limits;
  rules: Rule[];
  sources: string[];
  /** The site's own key when `key` is that of an egress source's view of it (core/egress/config.ts sourceSiteKey). */
  destination?: string;
};

/** The site key of an MX host set: the sorted, lowercased, deduplicated host names (MX rollup). */
export const siteKeyOf = (hosts: string[]) =>
  [...new Set(hosts.map((h) => h.toLowerCase().replace(/\.$/, '')))].sort().join(',');

/**
 * The site a recipient domain's mail goes to, with its limits from the file: `["default"]`, then every
 * provider whose MXSuffix matches one of the hosts (or DomainSuffix the domain), then the domain table
 * whose MX set is this site (`rollups`: site key → table, from resolving the file's domain tables), then
 * the domain's own table; later layers win. A domain table with `mx_rollup = false` makes the domain a
 * site of its own. Rules are tried most specific table first, `["default"]`'s last.
 */
export function siteFor(config: ShapingConfig, domain: string, hosts: string[], rollups: Map<string, Entry>): Site {
  const name = domain.toLowerCase();
  const own = config.domains.get(name);
  const key = own && !own.mxRollup ? `domain:${name}` : siteKeyOf(hosts);
  const lower = hosts.map((h) => h.toLowerCase().replace(/\.$/, ''));
  const layers: Entry[] = [];
  for (const p of config.providers) {
    if (
      lower.some((h) => p.mxSuffixes.some((sfx) => h.endsWith(sfx))) ||
      p.domainSuffixes.some((sfx) => name.endsWith(sfx))
    )
      layers.push(p);
  }
  const rolled = own && !own.mxRollup ? undefined : rollups.get(key);
  if (rolled && rolled !== own) layers.push(rolled);
  if (own) layers.push(own);
  const limits = { ...config.defaults };
  for (const l of layers) Object.assign(limits, l.patch);
  // The most specific table's rules first: the first rule that matches an answer is the one applied.
  const rules = [...[...layers].reverse().flatMap((l) => l.rules), ...config.defaultRules];
  return { key, domain: name, hosts: lower, limits, rules, sources: ['default', ...layers.map((l) => l.name)] };
}

/** The limits in force: the file's, with the SetConfig overrides an automation rule put on the site and not yet expired. */
export function effectiveLimits(site: Site, state: SiteState, now = Date.now()): Limits {
  const limits = { ...site.limits };
  for (const [name, o] of Object.entries(state.overrides)) {
    if (o.until > now) Object.assign(limits, parseLimit(name as LimitName, o.value));
  }
  return limits;
}

/** Limits as the file writes them (for the listing and the site row). */
export function describeLimits(l: Limits): Record<string, string | number | null> {
  return {
    connection_limit: l.connectionLimit,
    max_message_rate: l.maxMessageRate?.text ?? null,
    max_connection_rate: l.maxConnectionRate?.text ?? null,
    max_deliveries_per_connection: l.maxDeliveriesPerConnection,
  };
}
