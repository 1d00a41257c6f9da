import { hostname } from 'node:os';
import type { Db } from '../../db/index.js';
import { randomToken } from '../ids.js';
import { MAX_ANSWER_BYTES, type Entry, type Limits, type Rule, type ShapingConfig } from './config.js';
import { createConnectionPool, type PoolResult, type Route, type SmtpOptions, type Throttled } from './connections.js';
import { DEFAULT_SOURCE, sourceSiteKey } from '../egress/config.js';
import { describeLimits, effectiveLimits, siteFor, siteKeyOf, type Site } from './sites.js';
import { createShapingStore, type SiteState } from './store.js';
import { createReadCache } from './read-cache.js';

const SITE_CACHE_MS = 60_000;
const ROLLUP_REFRESH_MS = 10 * 60_000;

/**
 * Egress shaping for direct MX delivery (docs/deliverability.md). Per message: the site of the
 * recipient domain, the limits in force on it (file + SetConfig overrides), admission (no suspension, a
 * message token), then a transaction over a leased connection of the site; after it, the answer goes
 * through the site's automation rules. State that limits must agree on lives in PostgreSQL; this
 * process keeps only its own open connections and a one-second view of each site's suspension.
 */
export function createShaper(deps: {
  db: Db;
  config: ShapingConfig;
  smtp: SmtpOptions;
  resolveMx: (domain: string) => Promise<string[]>;
  addressOf: (host: string) => Promise<string>;
  /** How long this process trusts its view of a rate-less site's suspension and overrides (ms). */
  stateCacheMs?: number;
  leaseTtlMs?: number;
  idleMs?: number;
}) {
  const store = createShapingStore(deps.db);
  const holder = `${hostname()}:${process.pid}:${randomToken(6)}`;
  const pool = createConnectionPool({
    store,
    holder,
    smtp: deps.smtp,
    addressOf: deps.addressOf,
    ttlMs: deps.leaseTtlMs,
    idleMs: deps.idleMs,
  });
  const stateCacheMs = deps.stateCacheMs ?? 1000;
  // Each site's suspension and overrides as this process last read them (lanes share a read when it is stale).
  const states = createReadCache<string, SiteState>({ ttlMs: stateCacheMs, load: (key) => store.state(key) });
  const touched = new Map<string, number>();
  let rollups: { at: number; map: Map<string, Entry> } | undefined;
  let rolling: Promise<void> | undefined;

  /** Resolves the MX set of every domain table that rolls up, so each applies to its whole site. */
  async function rollupMap(): Promise<Map<string, Entry>> {
    if (rollups && Date.now() - rollups.at < ROLLUP_REFRESH_MS) return rollups.map;
    rolling ??= (async () => {
      const map = new Map<string, Entry>();
      const tables = [...deps.config.domains.values()].filter((e) => e.mxRollup);
      await Promise.all(
        tables.map(async (e) => {
          const hosts = await deps.resolveMx(e.name).catch(() => undefined);
          if (hosts?.length && !map.has(siteKeyOf(hosts))) map.set(siteKeyOf(hosts), e);
        }),
      );
      rollups = { at: Date.now(), map };
    })().finally(() => {
      rolling = undefined;
    });
    await rolling;
    return rollups!.map;
  }

  async function stateOf(site: Site, fresh?: SiteState): Promise<SiteState> {
    if (!fresh) return states.get(site.key);
    states.set(site.key, fresh);
    return fresh;
  }

  return {
    store,
    pool,

    /**
     * The site of a recipient domain whose MX hosts are `hosts` (in preference order), as seen from an
     * egress source: its key is the (source, site) key leases, buckets, suspensions and rules apply to,
     * `destination` the site's own key.
     */
    async site(domain: string, hosts: string[], source: string = DEFAULT_SOURCE): Promise<Site> {
      const found = siteFor(deps.config, domain, hosts, await rollupMap());
      const site = { ...found, key: sourceSiteKey(source, found.key), destination: found.key };
      const last = touched.get(`${site.key}|${site.domain}`);
      if (!last || Date.now() - last > SITE_CACHE_MS) {
        touched.set(`${site.key}|${site.domain}`, Date.now());
        await store.touch(site.key, { ...describeLimits(site.limits), sources: site.sources }, site.domain, {
          message: site.limits.maxMessageRate?.burst ?? 1,
          connection: site.limits.maxConnectionRate?.burst ?? 1,
        });
      }
      return site;
    },

    /** Whether a message may go to the site now (a message token taken), or how long it must wait. */
    async admit(site: Site): Promise<{ limits: Limits } | Throttled> {
      const now = Date.now();
      let state = await stateOf(site);
      let limits = effectiveLimits(site, state, now);
      if (state.suspendedUntil && state.suspendedUntil > now)
        return {
          throttled: true,
          site: site.key,
          waitMs: state.suspendedUntil - now,
          cause: `suspended: ${state.suspendCause ?? ''}`,
        };
      const rate = limits.maxMessageRate;
      if (!rate) return { limits };
      const taken = await store.takeMessage(site.key, rate.perSecond, rate.burst, now);
      state = await stateOf(site, taken);
      limits = effectiveLimits(site, state, now);
      if (state.suspendedUntil && state.suspendedUntil > now)
        return {
          throttled: true,
          site: site.key,
          waitMs: state.suspendedUntil - now,
          cause: `suspended: ${state.suspendCause ?? ''}`,
        };
      if (taken.taken) return { limits };
      return {
        throttled: true,
        site: site.key,
        spacingMs: 1000 / rate.perSecond,
        waitMs: Math.max(50, Math.ceil(((1 - taken.tokens) / rate.perSecond) * 1000)),
        cause: `max_message_rate ${rate.text} reached`,
      };
    },

    /** One transaction over a leased connection; a message token taken for it goes back when it cannot go. */
    async send(
      site: Site,
      limits: Limits,
      envelope: { from: string; to: string[] },
      raw: Buffer,
      route?: Route,
    ): Promise<PoolResult> {
      const r = await pool.send(site, limits, envelope, raw, (answer) => observe(site, answer), route);
      if (!('throttled' in r)) return r;
      if (limits.maxMessageRate)
        await store.refundMessage(site.key, limits.maxMessageRate.burst).catch(() => undefined);
      return { ...r, site: site.key };
    },

    /** Whether an automation rule has the (source, site) suspended now (this process's view, at most stateCacheMs old). */
    async suspended(site: Site): Promise<boolean> {
      return ((await stateOf(site)).suspendedUntil ?? 0) > Date.now();
    },

    observe,
    close: () => pool.close(),
  };

  /**
   * Runs a remote answer through the site's automation rules (the first rule whose regex matches the
   * answer, cut to MAX_ANSWER_BYTES) and records what it does: a suspension or a SetConfig override.
   */
  async function observe(site: Site, answer: string): Promise<Rule | undefined> {
    const text = Buffer.from(answer, 'utf8').subarray(0, MAX_ANSWER_BYTES).toString('utf8');
    const rule = site.rules.find((r) => r.regex.test(text));
    if (!rule) return undefined;
    const now = Date.now();
    const until = now + rule.durationMs;
    const label = `[${JSON.stringify(rule.table)}] ${rule.pattern}`;
    const state = await stateOf(site);
    for (const action of rule.actions) {
      if (action.kind === 'suspend') {
        // Many transactions in flight get the same answer: one suspension covers them.
        if ((state.suspendedUntil ?? 0) >= now + rule.durationMs * 0.9) continue;
        await store.suspend(site.key, until, label, text, now);
        states.set(site.key, { ...state, suspendedUntil: until, suspendCause: text });
        pool.drain(site.key);
      } else {
        const cur = state.overrides[action.name];
        if (cur && cur.value === action.value && cur.until >= now + rule.durationMs * 0.9) continue;
        await store.setOverride(site.key, action.name, action.value, until, label, text, now);
        states.set(site.key, {
          ...state,
          overrides: { ...state.overrides, [action.name]: { value: action.value, until, cause: text } },
        });
      }
    }
    return rule;
  }
}
export type Shaper = ReturnType<typeof createShaper>;
