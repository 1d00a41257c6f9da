import { and, eq } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import type { DomainRow } from '../domains/dto.js';
import { AppError, forbidden, notFound, tooMany } from '../errors.js';
import type { Actor } from '../tenancy.js';
import { secondsToMidnight, type CapHit, type LeaseGrant, type UsageService } from '../usage.js';

/**
 * The send gate: the one set of rules every outgoing message passes (docs/sending.md, The send gate).
 * The account may send (it exists, its email is verified, it is not suspended); the sender domain is
 * outbound-verified and, for a domain-scoped key, the key's own; and the message's recipients fit the
 * plan's daily cap and blocking monthly bucket, reserved atomically in the transaction that inserts the
 * message. Every path that inserts an outbound row calls it: `/v1/send` and batches, scheduled releases,
 * broadcast fan-out, sequence steps and route forwards. System mail (verification and sign-in links from
 * the service domain, core/transport/system-mail.ts) is the one exception: it is how an account gets verified.
 */

/** The account columns the gate judges. */
export type Standing = { emailVerified: boolean; suspendedAt: number | null };
type SenderDomain = Pick<DomainRow, 'id' | 'sendingEnabled' | 'spfVerified' | 'dkimVerified'>;
type Tx = Pick<Db, 'insert' | 'select'>;
/** What a reservation runs its statements on: the accepting transaction. */
type ReserveTx = Pick<Db, 'insert' | 'select' | 'execute'>;

/** Why this account may not send now, or undefined. */
export function accountRefusal(account: Standing | undefined): AppError | undefined {
  if (!account) return notFound('Account not found', 'account_not_found');
  if (account.suspendedAt !== null)
    return forbidden(
      'This account is suspended and cannot send mail; contact the operator of this service',
      'account_suspended',
    );
  if (!account.emailVerified)
    return forbidden('Verify the account email before sending (see GET /v1/me)', 'email_not_verified');
  return undefined;
}

/** Why mail may not go out from `name` (the domain row, or undefined when the account has none by that name), or undefined. */
export function senderRefusal(
  domain: SenderDomain | undefined | null,
  name: string,
  actor?: Pick<Actor, 'domainId'>,
): AppError | undefined {
  const usable =
    domain &&
    domain.sendingEnabled &&
    domain.spfVerified === 1 &&
    domain.dkimVerified === 1 &&
    (!actor?.domainId || actor.domainId === domain.id);
  return usable
    ? undefined
    : forbidden(`${name} is not a verified sending domain for this credential`, 'domain_not_verified');
}

/** The answer for a cap that refused: 429 with Retry-After for the daily cap, 402 for the monthly bucket. */
export function capRefusal(hit: CapHit, at?: number): AppError {
  if (hit === 'monthly')
    return new AppError(402, 'monthly_quota_exceeded', 'The monthly email bucket of this plan is used up');
  const day = at === undefined ? 'today' : `on ${new Date(at).toISOString().slice(0, 10)} (UTC)`;
  return tooMany(`The daily send cap of this plan is reached ${day}`, 'daily_limit', secondsToMidnight());
}

/** What an admitted sender carries on: its plan, and the sender domain row when one was asked about. */
export type Admitted = { plan: string; domain?: DomainRow };
/** The sender domain to check: by name (a From address) or by id (a message row's), or none (a forward goes out from the domain that received it). */
export type SenderQuery = { name: string } | { id: string };

export function createSendGate(deps: { db: Db; usage: UsageService }) {
  return {
    /**
     * Loads the account (and the sender domain when asked) and applies the account and sender rules:
     * answers the plan and domain, or the refusal. Pass `tx` when called inside a transaction.
     */
    async judge(
      q: { userId: string; sender?: SenderQuery; actor?: Pick<Actor, 'domainId'> },
      tx: Tx = deps.db,
    ): Promise<Admitted | AppError> {
      const u = schema.users;
      const [account] = await tx
        .select({ plan: u.plan, emailVerified: u.emailVerified, suspendedAt: u.suspendedAt })
        .from(u)
        .where(eq(u.id, q.userId));
      const refused = accountRefusal(account);
      if (refused || !q.sender) return refused ?? { plan: account!.plan };
      const d = schema.domains;
      const s = q.sender;
      const [domain] = await tx
        .select()
        .from(d)
        .where(and(eq(d.userId, q.userId), 'name' in s ? eq(d.domain, s.name) : eq(d.id, s.id)));
      const name = 'name' in s ? s.name : (domain?.domain ?? 'The sender domain');
      return senderRefusal(domain, name, q.actor) ?? { plan: account!.plan, domain };
    },

    /** Reserves `n` recipients all or nothing (for the day of `at`, default now); answers the refusal when a cap is reached. */
    async reserve(tx: ReserveTx, userId: string, plan: string, n: number, at?: number): Promise<AppError | undefined> {
      const { hit } = await deps.usage.reserve(tx, userId, plan, n, { at });
      return hit ? capRefusal(hit, at) : undefined;
    },

    /**
     * `reserve` for a send of now that may also lease allowance to `lease.holder` (core/gate/cap-lease.ts):
     * answers the refusal, or the lease granted with the reservation (when there was room to spare).
     */
    async reserveLeasing(
      tx: ReserveTx,
      userId: string,
      plan: string,
      n: number,
      lease: { holder: string; ttlMs: number; max: number },
    ): Promise<{ refusal?: AppError; lease?: LeaseGrant }> {
      const r = await deps.usage.reserve(tx, userId, plan, n, { lease });
      return r.hit ? { refusal: capRefusal(r.hit) } : { lease: r.lease };
    },

    /** Reserves as many of `n` recipients as fit; answers how many, and the refusal of the rest. */
    async reserveUpTo(
      tx: ReserveTx,
      userId: string,
      plan: string,
      n: number,
      at?: number,
    ): Promise<{ granted: number; refusal?: AppError }> {
      const { granted, hit } = await deps.usage.reserve(tx, userId, plan, n, { at, partial: true });
      return hit ? { granted, refusal: capRefusal(hit, at) } : { granted };
    },
  };
}
export type SendGate = ReturnType<typeof createSendGate>;

/** How a refusal is kept on a message row that will not go out (`last_error`). */
export const refusalNote = (err: AppError) => `${err.code}: ${err.message}`;
