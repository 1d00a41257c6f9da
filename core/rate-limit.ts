import { and, eq, lte, sql } from 'drizzle-orm';
import { schema, type Db } from '../db/index.js';
import { tooMany } from './errors.js';
import { clientKey } from './net/client-address.js';

/** Most keys one limiter keeps: past it, expired windows go first, then the oldest ones. */
const DEFAULT_MAX_KEYS = 10_000;

/**
 * A fixed-window counter per key, in process memory and bounded in size: one window per process. The
 * abuse guards of the API use createSharedRateLimiter (below), one window for the deployment.
 */
export function createRateLimiter(opts: { limit: number; windowMs: number; message: string; maxKeys?: number }) {
  const windows = new Map<string, { start: number; count: number }>();
  const maxKeys = opts.maxKeys ?? DEFAULT_MAX_KEYS;
  const live = (key: string, now: number) => {
    const w = windows.get(key);
    return w && now - w.start < opts.windowMs ? w : undefined;
  };
  const refuse = (w: { start: number }, now: number) =>
    tooMany(opts.message, 'rate_limited', Math.ceil((w.start + opts.windowMs - now) / 1000));
  return {
    /** Counts one event for `key`; 429 once the window holds more than `limit`. */
    hit(key: string, now = Date.now()): void {
      const w = live(key, now);
      if (!w) {
        windows.delete(key);
        windows.set(key, { start: now, count: 1 });
        if (windows.size > maxKeys) prune(now);
        return;
      }
      w.count += 1;
      if (w.count > opts.limit) throw refuse(w, now);
    },
    /** 429 when `key` has used up its window, without counting anything. */
    check(key: string, now = Date.now()): void {
      const w = live(key, now);
      if (w && w.count >= opts.limit) throw refuse(w, now);
    },
    reset(key: string): void {
      windows.delete(key);
    },
    get size() {
      return windows.size;
    },
  };
  function prune(now: number) {
    for (const [k, w] of windows) if (now - w.start >= opts.windowMs) windows.delete(k);
    // Still full of live windows: drop the oldest (Map order is insertion order).
    for (const k of windows.keys()) {
      if (windows.size <= maxKeys) break;
      windows.delete(k);
    }
  }
}
export type RateLimiter = ReturnType<typeof createRateLimiter>;

/** Of every hundred hits, about one also deletes the limiter's expired windows. */
const PRUNE_EVERY = 100;

/**
 * The same fixed window per key, kept in PostgreSQL (`rate_limit_windows`): every API process counts in
 * one window, so the limit holds for the deployment, not per process (docs/deployment.md, Limits across
 * processes). One upsert per hit; expired windows are pruned as it goes, so the table holds at most one
 * window's worth of keys.
 */
export function createSharedRateLimiter(
  db: Db,
  name: string,
  opts: { limit: number; windowMs: number; message: string; perAddress?: boolean },
) {
  const t = schema.rateLimitWindows;
  // Keys that are client addresses count per client (an IPv6 /64, an IPv4-mapped address as IPv4).
  const keyOf = (key: string) => (opts.perAddress ? clientKey(key) : key);
  const refuse = (start: number, now: number) =>
    tooMany(opts.message, 'rate_limited', Math.max(1, Math.ceil((start + opts.windowMs - now) / 1000)));
  return {
    /**
     * Counts one event for `key`; 429 once the window holds more than `limit`. Answers the window it was
     * counted in, so an attempt counted before its outcome is known can be given back (`release`).
     */
    async hit(rawKey: string, now = Date.now()): Promise<{ windowStart: number; windowEnd: number; count: number }> {
      const key = keyOf(rawKey);
      const expired = sql`${t.windowStart} <= ${now - opts.windowMs}`;
      const [w] = await db
        .insert(t)
        .values({ name, key, windowStart: now, count: 1 })
        .onConflictDoUpdate({
          target: [t.name, t.key],
          set: {
            windowStart: sql`case when ${expired} then ${now} else ${t.windowStart} end`,
            count: sql`case when ${expired} then 1 else ${t.count} + 1 end`,
          },
        })
        .returning({ windowStart: t.windowStart, count: t.count });
      if (Math.random() * PRUNE_EVERY < 1)
        await db.delete(t).where(and(eq(t.name, name), lte(t.windowStart, now - opts.windowMs)));
      if (w && w.count > opts.limit) throw refuse(w.windowStart, now);
      const windowStart = w?.windowStart ?? now;
      return { windowStart, windowEnd: windowStart + opts.windowMs, count: w?.count ?? 1 };
    },
    /** Gives back one event counted by `hit` in the window that started at `windowStart` (a later window is not touched). */
    async release(rawKey: string, windowStart: number): Promise<void> {
      await db
        .update(t)
        .set({ count: sql`greatest(${t.count} - 1, 0)` })
        .where(and(eq(t.name, name), eq(t.key, keyOf(rawKey)), eq(t.windowStart, windowStart)));
    },
    /** 429 when `key` has used up its window, without counting anything. */
    async check(key: string, now = Date.now()): Promise<void> {
      const [w] = await db
        .select({ windowStart: t.windowStart, count: t.count })
        .from(t)
        .where(and(eq(t.name, name), eq(t.key, keyOf(key))));
      if (w && now - w.windowStart < opts.windowMs && w.count >= opts.limit) throw refuse(w.windowStart, now);
    },
    async reset(key: string): Promise<void> {
      await db.delete(t).where(and(eq(t.name, name), eq(t.key, keyOf(key))));
    },
  };
}
export type SharedRateLimiter = ReturnType<typeof createSharedRateLimiter>;
