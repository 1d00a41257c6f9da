import { tooMany } from './errors.js';

/** Most keys one limiter keeps: past it, expired windows go first, then the oldest ones. */
const DEFAULT_MAX_KEYS = 10_000;

/**
 * A fixed-window counter per key, in process memory and bounded in size. Guards sign-in and mailing
 * endpoints against guessing and spam; a multi-process deployment gets one window per process, which is
 * still a bound.
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
