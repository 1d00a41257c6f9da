import type { Database, Listener } from '../db/index.js';

/** The channel the `api_keys` triggers notify on commit (migration 0025): a key's hash, or '' for "all keys". */
export const API_KEYS_CHANNEL = 'api_keys_changed';

/**
 * A bounded, per-process cache of credential rows by credential hash (never by secret), so a request with a
 * known key reads no table and takes no pooled connection. It serves only while its LISTEN connection is up:
 * every change that can end a key notifies all processes on commit, and each drops that entry. Before a hit is
 * served, the listener confirms it has seen every notification committed before the request (one `select 1` on
 * its own connection, shared by concurrent requests): a key revoked anywhere is refused everywhere from then on.
 * When the connection is lost the cache is emptied and bypassed until it listens again. Unknown credentials are
 * never cached, so a new key works at once. The TTL is a backstop only.
 */
export function createCredentialCache<T>(opts: {
  listen?: Database['listen'];
  channel?: string;
  maxEntries?: number;
  ttlMs?: number;
  /** The clock (tests). */
  now?: () => number;
}) {
  const now = opts.now ?? Date.now;
  const maxEntries = opts.maxEntries ?? 10_000;
  const ttlMs = opts.ttlMs ?? 30_000;
  // Insertion order is recency order: a hit moves its entry to the end, eviction takes the first.
  const entries = new Map<string, { value: T; expires: number }>();
  let listening = false;
  // Bumped by every invalidation: a read that began before one must not fill the cache with what it read.
  let generation = 0;
  const stats = { hits: 0, misses: 0, invalidations: 0 };

  // Opened by the first lookup, so a process that never checks a key (a worker) holds no extra connection.
  let listener: Listener | undefined;
  let closed = false;
  const start = () => {
    if (listener || closed || !opts.listen) return;
    listener = opts.listen(opts.channel ?? API_KEYS_CHANNEL, {
      message(hash) {
        generation += 1;
        stats.invalidations += 1;
        if (hash) entries.delete(hash);
        else entries.clear();
      },
      state(up) {
        generation += 1;
        entries.clear();
        listening = up;
      },
    });
  };

  return {
    /** The cached value, or undefined (also whenever the listener is down or cannot confirm it is current). */
    async get(hash: string): Promise<T | undefined> {
      if (!listening || !listener) {
        start();
        return undefined;
      }
      const e = entries.get(hash);
      if (!e || e.expires <= now()) {
        if (e) entries.delete(hash);
        stats.misses += 1;
        return undefined;
      }
      // Every revocation committed before this request has reached `message` once this resolves true, and
      // dropped the entry. What is there now is current: `e` itself, or a row another request read after the
      // last invalidation (`set` refuses one read before it). Requiring `e` itself made concurrent requests
      // miss whenever one of them refilled the entry, each refill causing the next misses (a storm under load).
      const current = await listener.sync();
      const found = entries.get(hash);
      if (!current || !found || found.expires <= now()) {
        stats.misses += 1;
        return undefined;
      }
      entries.delete(hash);
      entries.set(hash, found);
      stats.hits += 1;
      return found.value;
    },
    /** Taken before reading the table; `set` keeps the row only if no invalidation came in between. */
    stamp(): number {
      return generation;
    },
    set(hash: string, value: T, stamp: number): void {
      if (!listening || stamp !== generation) return;
      entries.delete(hash);
      if (entries.size >= maxEntries) entries.delete(entries.keys().next().value!);
      entries.set(hash, { value, expires: now() + ttlMs });
    },
    /** Drops one entry in this process now (the writer's own process does not wait for its notification). */
    forget(hash: string): void {
      generation += 1;
      entries.delete(hash);
    },
    /** Whether the cache is serving (its listener is up). */
    get active(): boolean {
      return listening;
    },
    get size(): number {
      return entries.size;
    },
    stats,
    async close(): Promise<void> {
      closed = true;
      await listener?.close();
      listening = false;
      entries.clear();
    },
  };
}
export type CredentialCache<T> = ReturnType<typeof createCredentialCache<T>>;
