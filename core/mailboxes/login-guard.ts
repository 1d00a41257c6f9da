import { tooMany } from '../errors.js';

/**
 * Per-IP login throttling for mailbox credentials (IMAP and the mailbox API): after `maxFailures`
 * failed logins within `lockoutMs`, the address is refused for `lockoutMs` from its last failure.
 * In process memory; each process keeps its own count, which is still a bound.
 */
export function createLoginGuard(opts: { maxFailures: number; lockoutMs: number }) {
  const failures = new Map<string, { count: number; last: number }>();
  const lockedFor = (ip: string, now: number) => {
    const f = failures.get(ip);
    if (!f) return 0;
    if (now - f.last >= opts.lockoutMs) {
      failures.delete(ip);
      return 0;
    }
    return f.count >= opts.maxFailures ? f.last + opts.lockoutMs - now : 0;
  };
  return {
    /** Throws 429 (with Retry-After seconds) while this address is locked out. */
    check(ip: string, now = Date.now()): void {
      const ms = lockedFor(ip, now);
      if (ms > 0) throw tooMany('Too many failed logins from this address; try again later', 'login_locked', Math.ceil(ms / 1000));
    },
    isLocked: (ip: string, now = Date.now()) => lockedFor(ip, now) > 0,
    fail(ip: string, now = Date.now()): void {
      const f = failures.get(ip);
      failures.set(ip, { count: (f && now - f.last < opts.lockoutMs ? f.count : 0) + 1, last: now });
      if (failures.size > 50_000) for (const [k, v] of failures) if (now - v.last >= opts.lockoutMs) failures.delete(k);
    },
    succeed(ip: string): void {
      failures.delete(ip);
    },
  };
}
export type LoginGuard = ReturnType<typeof createLoginGuard>;
