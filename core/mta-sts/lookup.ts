import type { Resolver } from 'node:dns/promises';
import { isNoRecord } from '../dns.js';
import { describeError, log } from '../log.js';
import type { MtaStsAnswer, MtaStsLookup } from './policy.js';
import { normalizeDomain, parseStsRecords, type StsRecord } from './record.js';
import { livePolicy, policyOf, type PolicyRow, type PolicyStore } from './store.js';

/** How long a TXT answer and a stored row are reused in one process. */
export const LOOKUP_CACHE_MS = 60_000;
/** A failed TXT lookup is asked again sooner. */
const DNS_ERROR_CACHE_MS = 5_000;
/** Entries kept per map; the oldest go first. */
const MAX_ENTRIES = 10_000;
/** A first fetch not seen finished is asked for again after this long (a run already open makes it a no-op). */
const FIRST_FETCH_AGAIN_MS = 5_000;
/** The answer while a domain's first policy is fetched: the transport defers its recipients this long. */
export const PENDING_WAIT_MS = 2_000;

type Txt = StsRecord | { dnsError: string };
type Cached<T> = { at: number; ttl?: number; value: Promise<T> };

/**
 * Answers kept by key for a time to live that depends on the answer (`ttlOf`), at most `max` of them
 * (the oldest go first). A lookup still running is shared; a rejected one is not kept.
 */
function boundedCache<T>(max: number, ttlOf: (v: T) => number) {
  const map = new Map<string, Cached<T>>();
  return {
    get(key: string, load: () => Promise<T>, now: number): Cached<T> {
      const hit = map.get(key);
      if (hit && (hit.ttl === undefined || now - hit.at < hit.ttl)) return hit;
      map.delete(key);
      if (map.size >= max) map.delete(map.keys().next().value!);
      const entry: Cached<T> = { at: now, value: load() };
      map.set(key, entry);
      entry.value.then(
        (v) => void (entry.ttl = ttlOf(v)),
        () => void (map.get(key) === entry && map.delete(key)),
      );
      return entry;
    },
    delete: (key: string) => map.delete(key),
  };
}

/**
 * The MTA-STS lookup the transport asks per message (RFC 8461 §5), cheap: per process, a domain's TXT
 * answer and its stored row are reused for LOOKUP_CACHE_MS. No record: the stored policy if live, else
 * none. The record's id equal to the stored row's and the row unexpired: that row (failed or absent:
 * none). Otherwise the fetch workflow is started (a run already open makes that a no-op) and the live
 * stored policy answers meanwhile, else "pending". A failed TXT lookup: the live stored policy, else none.
 */
export function createMtaStsLookup(deps: {
  store: PolicyStore;
  resolver: Resolver;
  startFetch: (domain: string) => Promise<void>;
  /** How long a refresh that keeps failing waits before it is asked for again (MTA_STS_RETRY_MS). */
  retryMs: number;
  cacheMs?: number;
}): MtaStsLookup & { forget(domain: string): void } {
  const cacheMs = deps.cacheMs ?? LOOKUP_CACHE_MS;
  const txts = boundedCache<Txt>(MAX_ENTRIES, (t) => ('dnsError' in t ? DNS_ERROR_CACHE_MS : cacheMs));
  const rows = boundedCache<PolicyRow | undefined>(MAX_ENTRIES, () => cacheMs);
  const started = new Map<string, number>();

  const readTxt = async (domain: string): Promise<Txt> => {
    try {
      return parseStsRecords(await deps.resolver.resolveTxt(`_mta-sts.${domain}`));
    } catch (err) {
      if (isNoRecord(err)) return { none: 'no _mta-sts record' };
      return { dnsError: (err as NodeJS.ErrnoException).code ?? 'error' };
    }
  };

  function startFetch(domain: string, id: string, serving: boolean, now: number) {
    const key = `${domain} ${id}`;
    const last = started.get(key);
    if (last !== undefined && now - last < (serving ? deps.retryMs : FIRST_FETCH_AGAIN_MS)) return;
    if (started.size >= MAX_ENTRIES) started.delete(started.keys().next().value!);
    started.delete(key);
    started.set(key, now);
    deps
      .startFetch(domain)
      .catch((err) => log.warn(`[mta-sts] could not start the policy fetch of ${domain}: ${describeError(err)}`));
  }

  const answer = (row: PolicyRow): MtaStsAnswer => ({ policy: policyOf(row) });

  return {
    async policyFor(raw) {
      const domain = normalizeDomain(raw);
      if (!domain) return { policy: null };
      const now = Date.now();
      const txtEntry = txts.get(domain, () => readTxt(domain), now);
      const [txt, row] = await Promise.all([txtEntry.value, rows.get(domain, () => deps.store.get(domain), now).value]);
      if (!('id' in txt)) return livePolicy(row, now) ? answer(row) : { policy: null };
      const unexpired = row !== undefined && row.expiresAt > now;
      if (unexpired && row.recordId === txt.id) return row.status === 'ok' ? answer(row) : { policy: null };
      // A row written after this process read the record is the newer word on the domain.
      if (unexpired && row.fetchedAt >= txtEntry.at) return row.status === 'ok' ? answer(row) : { policy: null };
      const serving = livePolicy(row, now);
      startFetch(domain, txt.id, serving, now);
      rows.delete(domain); // the next message reads the row again, to see the fetch's outcome
      if (serving) return answer(row);
      return { pending: true, waitMs: PENDING_WAIT_MS, cause: `MTA-STS policy of ${domain} being fetched` };
    },
    forget(domain) {
      txts.delete(domain);
      rows.delete(domain);
    },
  };
}
