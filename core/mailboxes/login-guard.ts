import { and, eq, lte, sql } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { tooMany } from '../errors.js';
import { clientKey } from '../net/client-address.js';

/** The `rate_limit_windows` name of mailbox login failures. */
const NAME = 'mailbox_login';
/** Of every hundred failures, about one also deletes the expired rows. */
const PRUNE_EVERY = 100;

/**
 * Per-client login throttling (an IPv6 client by its /64) for mailbox credentials (IMAP and the mailbox API): after `maxFailures`
 * failed logins, each within `lockoutMs` of the one before, the address is refused until `lockoutMs`
 * after its last failure. Kept in PostgreSQL (`rate_limit_windows`, one row per address: its failure
 * count and the time of the last), so every IMAP and API process counts the same failures: a client
 * cannot spread its guesses over the processes of a scaled-out deployment.
 */
export function createLoginGuard(db: Db, opts: { maxFailures: number; lockoutMs: number }) {
  const t = schema.rateLimitWindows;
  return {
    /** Throws 429 `login_locked` (with Retry-After seconds) while this address is locked out; else answers its failures so far. */
    async check(ip: string, now = Date.now()): Promise<number> {
      const [w] = await db
        .select({ last: t.windowStart, count: t.count })
        .from(t)
        .where(and(eq(t.name, NAME), eq(t.key, clientKey(ip))));
      const ms = w && w.count >= opts.maxFailures ? w.last + opts.lockoutMs - now : 0;
      if (ms > 0)
        throw tooMany(
          'Too many failed logins from this address; try again later',
          'login_locked',
          Math.ceil(ms / 1000),
        );
      return w?.count ?? 0;
    },
    /**
     * Counts one attempt before its secret is checked (429 `login_locked` when the address has no attempt
     * left), so a burst of concurrent logins checks at most `maxFailures` of them. The attempt stays counted
     * as a failure unless `succeed` gives it back. A refused attempt does not move the lockout's end.
     */
    async begin(ip: string, now = Date.now()): Promise<void> {
      const stale = sql`${t.windowStart} <= ${now - opts.lockoutMs}`;
      const open = sql`${stale} or ${t.count} < ${opts.maxFailures}`;
      const [w] = await db
        .insert(t)
        .values({ name: NAME, key: clientKey(ip), windowStart: now, count: 1 })
        .onConflictDoUpdate({
          target: [t.name, t.key],
          set: {
            windowStart: sql`case when ${open} then ${now} else ${t.windowStart} end`,
            count: sql`case when ${stale} then 1 else ${t.count} + 1 end`,
          },
        })
        .returning({ last: t.windowStart, count: t.count });
      if (w && w.count > opts.maxFailures) {
        throw tooMany(
          'Too many failed logins from this address; try again later',
          'login_locked',
          Math.max(1, Math.ceil((w.last + opts.lockoutMs - now) / 1000)),
        );
      }
    },
    /** Counts a failure: one more after a recent one, else the first of a new run. */
    async fail(ip: string, now = Date.now()): Promise<void> {
      const stale = sql`${t.windowStart} <= ${now - opts.lockoutMs}`;
      await db
        .insert(t)
        .values({ name: NAME, key: clientKey(ip), windowStart: now, count: 1 })
        .onConflictDoUpdate({
          target: [t.name, t.key],
          set: { windowStart: now, count: sql`case when ${stale} then 1 else ${t.count} + 1 end` },
        });
      if (Math.random() * PRUNE_EVERY < 1)
        await db.delete(t).where(and(eq(t.name, NAME), lte(t.windowStart, now - opts.lockoutMs)));
    },
    /**
     * A good login gives back the attempt `begin` counted. Only its own: clearing the address's failures
     * would let a client holding one good password reset its count between guesses, and would free the
     * places of a concurrent burst's guesses still being checked.
     */
    async succeed(ip: string): Promise<void> {
      await db
        .update(t)
        .set({ count: sql`greatest(${t.count} - 1, 0)` })
        .where(and(eq(t.name, NAME), eq(t.key, clientKey(ip))));
    },
  };
}
export type LoginGuard = ReturnType<typeof createLoginGuard>;
