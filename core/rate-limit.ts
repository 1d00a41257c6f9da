import { tooMany } from './errors.js';

/**
 * A fixed-window counter per key, in process memory. Guards sign-in and mailing endpoints against
 * guessing and spam; a multi-process deployment gets one window per process, which is still a bound.
 */
export function createRateLimiter(opts: { limit: number; windowMs: number; message: string }) {
  const windows = new Map<string, { start: number; count: number }>();
  return {
    hit(key: string, now = Date.now()): void {
      const w = windows.get(key);
      if (!w || now - w.start >= opts.windowMs) {
        windows.set(key, { start: now, count: 1 });
        if (windows.size > 10_000) prune(now);
        return;
      }
      w.count += 1;
      if (w.count > opts.limit) throw tooMany(opts.message, 'rate_limited', Math.ceil((w.start + opts.windowMs - now) / 1000));
    },
    reset(key: string): void {
      windows.delete(key);
    },
  };
  function prune(now: number) {
    for (const [k, w] of windows) if (now - w.start >= opts.windowMs) windows.delete(k);
  }
}
export type RateLimiter = ReturnType<typeof createRateLimiter>;
