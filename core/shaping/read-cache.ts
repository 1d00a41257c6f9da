/**
 * A process's short-lived view of rows it reads on every message (a site's suspension, a domain's warm-up
 * plan, a sending domain's key): a value is trusted for `ttlMs` from when its read was asked. Lanes that find
 * it stale at the same moment share one read instead of each sending its own: a batch of twenty lanes would
 * otherwise read the same row twenty times each time the view expires.
 *
 * `set` records a fresher value this process learned otherwise (a statement that returned it); `forget`
 * drops the view (this process changed the row). Either way a read already under way is neither shared
 * any more nor kept when it answers, so nothing older than what the process knows is cached.
 */
export type ReadCache<K, V> = {
  get(key: K): Promise<V>;
  set(key: K, value: V): void;
  forget(key: K): void;
};

export function createReadCache<K, V>(opts: {
  ttlMs: number;
  /** Reads the value; `previous` is the expired one, if any (to keep what did not change, such as a parsed key). */
  load: (key: K, previous: V | undefined) => Promise<V>;
  /** Entries kept at most (all are dropped past it: the next reads fill it again). */
  max?: number;
  now?: () => number;
}): ReadCache<K, V> {
  const now = opts.now ?? Date.now;
  const max = opts.max ?? 10_000;
  const entries = new Map<K, { at: number; value: V }>();
  type Read = { promise: Promise<V>; superseded: boolean };
  const reads = new Map<K, Read>();

  const supersede = (key: K) => {
    const r = reads.get(key);
    if (!r) return;
    r.superseded = true;
    reads.delete(key);
  };
  const keep = (key: K, at: number, value: V) => {
    if (entries.size >= max && !entries.has(key)) entries.clear();
    entries.set(key, { at, value });
  };

  return {
    get(key) {
      const hit = entries.get(key);
      if (hit && now() - hit.at < opts.ttlMs) return Promise.resolve(hit.value);
      const under = reads.get(key);
      if (under) return under.promise;
      const at = now();
      const read: Read = { promise: Promise.resolve(undefined as V), superseded: false };
      read.promise = opts
        .load(key, hit?.value)
        .then((value) => {
          if (!read.superseded) keep(key, at, value);
          return value;
        })
        .finally(() => {
          if (reads.get(key) === read) reads.delete(key);
        });
      reads.set(key, read);
      return read.promise;
    },
    set(key, value) {
      supersede(key);
      keep(key, now(), value);
    },
    forget(key) {
      supersede(key);
      entries.delete(key);
    },
  };
}
