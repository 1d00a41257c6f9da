import { and, eq, lt, or, sql } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { randomToken } from '../ids.js';
import { log } from '../log.js';
import { DB_NOW_MS, dayKey, monthKey, type LeaseGrant } from '../usage.js';

/**
 * Leased cap allowance (docs/sending.md, Leased cap allowance): a capped account's sends in this process
 * take recipients from a block of allowance reserved once in PostgreSQL (the `cap_leases` row the
 * reservation wrote, counted against the caps by every other reservation), so they need no transaction of
 * their own. Each send moves its recipients from the lease row to the usage counters in the statement that
 * writes it (core/sending/accept-writer.ts), and that statement fails unless the lease row still holds them,
 * unexpired: a lease another reservation took back, or one past its expiry, admits nothing. The rest is given
 * back when the account is idle here, when the lease nears its expiry, and at shutdown; a crashed process's
 * lease simply expires.
 */
export const CAP_LEASE_TTL_MS = 30_000;
/** This process stops taking from a lease this long before PostgreSQL's expiry (the write still has to land). */
const LOCAL_MARGIN_MS = 10_000;
/** A lease unused this long goes back. */
const IDLE_MS = 5_000;
/** The most recipients one lease holds. */
export const CAP_LEASE_MAX = 100;
/** Expired leases older than this are deleted by whoever gives one back. */
const EXPIRED_GRACE_MS = 60_000;
/** What the write statement raises when a lease no longer holds what a send took from it. */
export const LEASE_LOST = 'cap lease lost';

/** Recipients taken from a lease for one send. */
export type LeaseUse = {
  id: string;
  userId: string;
  day: string;
  month: string;
  n: number;
  /** The plan's caps as the send found them: the write also checks the counters stay within them. */
  caps: { day: number | null; month: number | null };
};
type Held = LeaseGrant & { left: number; deadline: number; lastUsed: number; inflight: number; dead: boolean };

/** True when `err` is the write statement's refusal of a lease (then reserve the send the ordinary way). */
export function isLeaseLost(err: unknown): boolean {
  for (let e = err as { message?: string; cause?: unknown } | undefined; e; e = e.cause as typeof e)
    if (typeof e.message === 'string' && e.message.includes(LEASE_LOST)) return true;
  return false;
}

export function createCapLeases(deps: { db: Db; now?: () => number }) {
  const now = deps.now ?? (() => performance.now());
  const holder = `h_${randomToken(12)}`;
  const byUser = new Map<string, Held>();
  /** Leases given up while sends from them were still being written: returned when the last one lands. */
  const draining = new Set<Held>();
  const returning = new Set<Promise<void>>();
  /** When each account last reserved the ordinary way here: a second within IDLE_MS asks for a lease. */
  const lastReserve = new Map<string, number>();
  const asking = new Set<string>();

  function giveBack(h: Held): void {
    const l = schema.capLeases;
    const p = deps.db
      .delete(l)
      .where(
        or(
          eq(l.id, h.id),
          and(eq(l.userId, h.userId), lt(l.expiresAt, sql`${DB_NOW_MS} - ${EXPIRED_GRACE_MS}::bigint`)),
        ),
      )
      .then(
        () => undefined,
        (err: Error) =>
          log.warn({ error: err.message, accountId: h.userId }, '[cap-lease] could not give back a lease'),
      );
    returning.add(p);
    void p.finally(() => returning.delete(p));
  }

  function retire(h: Held): void {
    if (h.dead) return;
    h.dead = true;
    if (byUser.get(h.userId) === h) byUser.delete(h.userId);
    if (h.inflight === 0) giveBack(h);
    else draining.add(h);
  }

  function sweep(): void {
    const t = now();
    for (const h of byUser.values())
      if (t - h.lastUsed > IDLE_MS || t > h.deadline || h.day !== dayKey() || h.month !== monthKey()) retire(h);
    for (const [userId, at] of lastReserve) if (t - at > IDLE_MS) lastReserve.delete(userId);
  }
  const timer = setInterval(sweep, 1_000);
  timer.unref();

  return {
    holder,
    /** The clock leases are timed by (pass its reading from before a reservation to `adopt`). */
    now,

    /** `n` recipients from this process's lease of the account, or undefined (reserve the ordinary way). */
    take(userId: string, n: number, caps: LeaseUse['caps']): LeaseUse | undefined {
      const h = byUser.get(userId);
      if (!h || h.dead || h.left < n || now() > h.deadline || h.day !== dayKey() || h.month !== monthKey())
        return undefined;
      h.left -= n;
      h.inflight += 1;
      h.lastUsed = now();
      return { id: h.id, userId, day: h.day, month: h.month, n, caps };
    },

    /**
     * After the write of a send taken from a lease: `written`, `lost` (the lease no longer held it: drop the
     * lease), or `failed` (nothing was written: the recipients are still the lease's).
     */
    settle(use: LeaseUse, outcome: 'written' | 'lost' | 'failed'): void {
      const h = byUser.get(use.userId)?.id === use.id ? byUser.get(use.userId)! : undefined;
      const d = h ?? [...draining].find((x) => x.id === use.id);
      if (!d) return;
      d.inflight -= 1;
      if (outcome === 'failed' && !d.dead) d.left += use.n;
      if (outcome === 'lost') retire(d);
      if (d.dead && d.inflight === 0 && draining.delete(d)) giveBack(d);
    },

    /**
     * Whether an ordinary reservation of the account should ask for a lease: it reserved here recently, and
     * no other reservation of it here is asking already. A true answer must be followed by `granted`.
     */
    wants(userId: string): boolean {
      const t = now();
      const recent = (lastReserve.get(userId) ?? -Infinity) > t - IDLE_MS;
      lastReserve.set(userId, t);
      if (!recent || asking.has(userId)) return false;
      asking.add(userId);
      return true;
    },

    /** After a reservation that asked: the lease it committed, if any (`startedAt`: `now()` before it began). */
    granted(userId: string, grant: LeaseGrant | undefined, startedAt: number): void {
      asking.delete(userId);
      if (!grant) return;
      const old = byUser.get(userId);
      if (old) retire(old);
      const deadline = startedAt + CAP_LEASE_TTL_MS - LOCAL_MARGIN_MS;
      byUser.set(userId, { ...grant, left: grant.amount, deadline, lastUsed: now(), inflight: 0, dead: false });
    },

    /** Gives every lease back (at shutdown); sends still being written give theirs back as they land. */
    async close(): Promise<void> {
      clearInterval(timer);
      for (const h of [...byUser.values()]) retire(h);
      await Promise.all([...returning]);
    },
  };
}
export type CapLeases = ReturnType<typeof createCapLeases>;
