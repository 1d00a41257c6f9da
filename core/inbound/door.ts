import { and, eq, gte, sql } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { AppError } from '../errors.js';
import type { StorageQuota } from '../storage-quota.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Tx = Db | Parameters<Parameters<Db['transaction']>[0]>[0] | any;

/** What an account whose address is not verified may receive per UTC day (UNVERIFIED_INBOUND_DAILY, …_BYTES). */
export type InboundAllowance = { messages: number; bytes: number };

const DAY_MS = 86_400_000;
/** How long RCPT trusts what it read about an account (DATA always reads again, under the account's lock). */
const RCPT_VIEW_MS = 1000;

/**
 * 452 4.2.2 (RFC 5321 §4.2.2, RFC 3463 X.2.2 "mailbox full"): a temporary refusal, so the sending MTA
 * keeps the message and tries again once the owner made room (or the next day for the allowance).
 */
const full = (why: string) => new AppError(452, 'mailbox_full', `4.2.2 ${why}`, true);
/** 552 5.2.2: this message is larger than everything the account may ever hold, so retrying cannot help. */
const never = (why: string) => new AppError(552, 'mailbox_full', `5.2.2 ${why}`);

type View = { verified: boolean; used: number; today: { messages: number; bytes: number } };

/**
 * Storage counted at the door of the SMTP ingress: inbound mail counts against the account's storage
 * quota, and an account whose address is not verified has a small daily allowance. RCPT refuses an
 * account already past either (from a view at most 1 s old); DATA refuses a message that would pass
 * either, checked inside the accepting transaction under the account's storage lock.
 */
export function createInboundDoor(deps: { db: Db; storage: StorageQuota; unverifiedDaily: InboundAllowance }) {
  const views = new Map<string, { at: number; view: Promise<View> }>();

  async function read(q: Tx, userId: string): Promise<View> {
    const m = schema.messages;
    const [user] = await q.select({ verified: schema.users.emailVerified }).from(schema.users).where(eq(schema.users.id, userId));
    const since = Date.now() - (Date.now() % DAY_MS);
    const [today] = user?.verified ? [{ n: 0, bytes: 0 }] : await q.select({ n: sql<string>`count(*)`, bytes: sql<string>`coalesce(sum(${m.sizeBytes}), 0)` })
      .from(m).where(and(eq(m.userId, userId), eq(m.direction, 'inbound'), gte(m.createdAt, since)));
    const usage = await deps.storage.usage(userId, q);
    return { verified: Boolean(user?.verified), used: usage.used, today: { messages: Number(today?.n ?? 0), bytes: Number(today?.bytes ?? 0) } };
  }

  /** Throws the SMTP refusal for `bytes` more (0 at RCPT: is the account already past a limit?). */
  function judge(v: View, bytes: number, keepsCopy: boolean, address: string): void {
    const quota = deps.storage.quotaBytes;
    if (keepsCopy) {
      if (bytes > quota) throw never(`<${address}>: the message is larger than this mailbox's storage quota (${quota} bytes)`);
      if (v.used + bytes > quota || v.used >= quota) throw full(`<${address}>: mailbox full (storage quota of ${quota} bytes reached), try again later`);
    }
    if (!v.verified) {
      const a = deps.unverifiedDaily;
      if (bytes > a.bytes) throw never(`<${address}>: the message is larger than the daily inbound allowance (${a.bytes} bytes) of an unverified account`);
      if (v.today.messages >= a.messages || v.today.bytes + bytes > a.bytes || v.today.bytes >= a.bytes) {
        throw full(`<${address}>: daily inbound allowance of an unverified account used up (${a.messages} messages, ${a.bytes} bytes), try again tomorrow`);
      }
    }
  }

  return {
    /** RCPT TO for a mailbox of `userId`: 452 4.2.2 when the account is already over its quota or allowance. */
    async atRcpt(userId: string, address: string, keepsCopy: boolean): Promise<void> {
      let hit = views.get(userId);
      if (!hit || Date.now() - hit.at > RCPT_VIEW_MS) {
        hit = { at: Date.now(), view: read(deps.db, userId) };
        views.set(userId, hit);
        hit.view.catch(() => views.delete(userId));
        if (views.size > 10_000) views.delete(views.keys().next().value!);
      }
      judge(await hit.view, 0, keepsCopy, address);
    },

    /**
     * DATA: refuses a message that would pass the quota or the allowance. Inside the accepting `tx` it
     * first takes the account's storage lock, so concurrent messages are judged one after the other;
     * without a transaction (the check before parsing) it is a cheaper early answer.
     */
    async atData(q: Tx, userId: string, address: string, bytes: number, keepsCopy: boolean, opts: { locked?: boolean } = {}): Promise<void> {
      views.delete(userId);
      if (opts.locked) await deps.storage.lock(q, userId);
      judge(await read(q, userId), bytes, keepsCopy, address);
    },
  };
}
export type InboundDoor = ReturnType<typeof createInboundDoor>;
