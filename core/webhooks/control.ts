import { createHash } from 'node:crypto';
import { and, eq, sql } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import type { MailboxStore } from '../mailboxes/store.js';
import { isAppError } from '../errors.js';
import { log } from '../log.js';

/** The inbound policy's `addRule`, as a block-sender reply uses it. */
type AddRule = (
  domain: { id: string; userId: string },
  input: { kind: 'address'; value: string; action: 'block' },
  origin: 'webhook-reply',
) => Promise<unknown>;

/**
 * Control-mode replies (docs/receiving.md, Control replies): the body a webhook consumer answers a delivery
 * with, as the official SDKs write it: `{"status":"spam"}` (replySpam), `{"status":"drop"}` (replyDrop),
 * `{"status":"ok","actions":[{"type":"block-sender"}]}` (replyBlockSender). A 2xx whose body is one of them
 * acknowledges the delivery in `ack` mode too.
 */
export type ControlReply = { status: 'ok' | 'spam' | 'drop'; actions: string[] };
/** What the reply did, recorded on the attempt (`delivery_attempts.control`). */
export type ControlRecord = ControlReply & { applied: string[]; ignored?: string[]; error?: string };

/** Replies longer than this are not read as control replies (they are still captured, cut, on the attempt). */
export const CONTROL_MAX_BYTES = 4096;
const MAX_ACTIONS = 10;
const STATUSES: readonly string[] = ['ok', 'spam', 'drop'];
export const KNOWN_ACTIONS: readonly string[] = ['block-sender'];

/**
 * The control reply in a response body, or null: a JSON object whose `status` is `ok`, `spam` or `drop`, with
 * optional `actions` (objects with a string `type`, at most ten). A bare `{"status":"ok"}` is an ack, not a
 * control reply (null). Bodies over CONTROL_MAX_BYTES are not parsed.
 */
export function parseControl(body: string): ControlReply | null {
  if (body.length > CONTROL_MAX_BYTES || Buffer.byteLength(body) > CONTROL_MAX_BYTES) return null;
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return null;
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return null;
  const { status, actions } = parsed as { status?: unknown; actions?: unknown };
  if (typeof status !== 'string' || !STATUSES.includes(status)) return null;
  if (actions !== undefined && !Array.isArray(actions)) return null;
  const types = (actions ?? [])
    .slice(0, MAX_ACTIONS)
    .map((a: unknown) => (typeof a === 'object' && a !== null ? (a as { type?: unknown }).type : undefined))
    .filter((t): t is string => typeof t === 'string')
    .map((t) => t.slice(0, 64));
  if (status === 'ok' && types.length === 0) return null;
  return { status: status as ControlReply['status'], actions: types };
}

/** Applies control replies of inbound deliveries to their message: spam mark, drop, sender block. All idempotent. */
export function createControlReplies(deps: {
  db: Db;
  mailboxStore: MailboxStore;
  /** The inbound policy's rule writer (core/inbound/policy.ts); without it the rule row is written here. */
  addRule?: AddRule;
}) {
  const { db } = deps;
  const m = schema.messages;

  /** A message without a verdict (received before scoring, or made by POST /v1/route) is marked all the same. */
  const UNSCORED = JSON.stringify({ scored: false, reason: 'not_scored' });

  /** `spam`: the verdict gains `marked: true`; nothing is trained, nothing else changes. */
  async function markSpam(messageId: string, at: number) {
    // Who and when are on the attempt that carried the reply (`delivery_attempts.control`).
    const mark = JSON.stringify({ marked: true });
    await db
      .update(m)
      .set({ spam: sql`coalesce(${m.spam}, ${UNSCORED}::jsonb) || ${mark}::jsonb`, updatedAt: at })
      .where(eq(m.id, messageId));
  }

  /**
   * `drop`: the message is discarded: its stored copies go (the raw or sealed copy with the payload, the
   * mailbox copies) and the row stays as a record, status `dropped`, without subject or body.
   */
  async function drop(messageId: string, at: number) {
    await db.delete(schema.inboundRaw).where(eq(schema.inboundRaw.messageId, messageId));
    const copies = await db
      .select({ mailboxId: schema.mailboxMessages.mailboxId, uid: schema.mailboxMessages.uid })
      .from(schema.mailboxMessages)
      .where(eq(schema.mailboxMessages.messageId, messageId));
    const byBox = new Map<string, number[]>();
    for (const c of copies) byBox.set(c.mailboxId, [...(byBox.get(c.mailboxId) ?? []), c.uid]);
    for (const [mailboxId, uids] of byBox) await deps.mailboxStore.remove(mailboxId, uids);
    await db
      .update(m)
      .set({ status: 'dropped', subject: null, text: null, html: null, updatedAt: at })
      .where(eq(m.id, messageId));
  }

  /**
   * `block-sender`: a sender rule (address, block, origin webhook-reply) for the message's From address (the
   * payload's `from.address`) on its domain, through the inbound policy's `addRule` (which clears its rule
   * cache and keeps the per-domain cap); the same address again answers the stored rule.
   */
  async function blockSender(message: { userId: string | null; domainId: string | null; fromAddr: string }) {
    const value = message.fromAddr.trim().toLowerCase();
    if (!message.userId || !message.domainId || !value.includes('@')) return false;
    if (deps.addRule) {
      await deps.addRule(
        { id: message.domainId, userId: message.userId },
        { kind: 'address', value, action: 'block' },
        'webhook-reply',
      );
      return true;
    }
    const id = `sbr_${createHash('sha256').update(`${message.domainId}\0address\0${value}`).digest('base64url').slice(0, 24)}`;
    await db
      .insert(schema.senderRules)
      .values({
        id,
        userId: message.userId,
        domainId: message.domainId,
        kind: 'address',
        value,
        action: 'block',
        origin: 'webhook-reply',
        createdAt: Date.now(),
      })
      .onConflictDoNothing();
    return true;
  }

  /** Runs one effect; a failure is recorded on the attempt and does not stop the others. */
  async function attempt(record: ControlRecord, name: string, effect: () => Promise<boolean>) {
    try {
      if (await effect()) record.applied.push(name);
      else (record.ignored ??= []).push(name);
    } catch (err) {
      const message = (err as { expose?: boolean; message?: string }).message ?? 'error';
      log.error({ effect: name, error: message }, 'control reply not applied');
      record.error = `${name}: ${isAppError(err) ? message : 'internal error'}`;
    }
  }

  return {
    /** Applies `reply` to the delivery's message; answers what was done, for the attempt's record. Never throws. */
    async apply(
      delivery: { messageId: string; userId: string; kind: string },
      reply: ControlReply,
    ): Promise<ControlRecord> {
      const record: ControlRecord = { ...reply, applied: [] };
      if (delivery.kind !== 'inbound') return { ...record, error: 'not an inbound delivery' };
      let msg: { userId: string | null; domainId: string | null; fromAddr: string } | undefined;
      try {
        [msg] = await db
          .select({ userId: m.userId, domainId: m.domainId, fromAddr: m.fromAddr })
          .from(m)
          .where(and(eq(m.id, delivery.messageId), eq(m.userId, delivery.userId)));
      } catch (err) {
        log.error({ messageId: delivery.messageId, error: (err as Error).message }, 'control reply not applied');
        return { ...record, error: 'not applied: internal error' };
      }
      if (!msg) return { ...record, error: 'message not found' };
      const at = Date.now();
      for (const type of reply.actions) {
        if (type === 'block-sender') await attempt(record, type, () => blockSender(msg));
        else (record.ignored ??= []).push(type);
      }
      if (reply.status === 'spam')
        await attempt(record, 'spam', () => markSpam(delivery.messageId, at).then(() => true));
      else if (reply.status === 'drop')
        await attempt(record, 'drop', () => drop(delivery.messageId, at).then(() => true));
      return record;
    },
  };
}
export type ControlReplies = ReturnType<typeof createControlReplies>;
