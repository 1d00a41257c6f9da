import { configGeneration } from '../mail/config-changes.js';

/**
 * Per-process caches of the receiving config every inbound message reads (a domain by name with its routes):
 * an entry lives at most CONFIG_MS, and any change made in this process clears them all at once (the writers
 * of domains and routes call `receivingConfigChanged`, core/mail/config-changes.ts). A change committed by
 * another process clears them when its PostgreSQL notification arrives (migration 0027); CONFIG_MS is the
 * backstop should a notification be missed.
 */
export const CONFIG_MS = 5_000;
const MAX_ENTRIES = 10_000;

/** `load(key)` remembered per key for at most `ttlMs` and until the next `receivingConfigChanged`. */
export function configCache<V>(load: (key: string) => Promise<V>, ttlMs = CONFIG_MS) {
  const entries = new Map<string, { at: number; gen: number; value: Promise<V> }>();
  return (key: string): Promise<V> => {
    let hit = entries.get(key);
    if (!hit || hit.gen !== configGeneration() || Date.now() - hit.at > ttlMs) {
      hit = { at: Date.now(), gen: configGeneration(), value: load(key) };
      entries.delete(key);
      entries.set(key, hit);
      const mine = hit;
      hit.value.catch(() => {
        if (entries.get(key) === mine) entries.delete(key);
      });
      if (entries.size > MAX_ENTRIES) entries.delete(entries.keys().next().value!);
    }
    return hit.value;
  };
}
