import type { DKIMSignOptions } from 'mailauth';
import { dkimSign } from 'mailauth/lib/dkim/sign.js';
import { and, asc, eq, inArray, isNull, lt, or, sql } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import type { AttachmentService } from '../attachments/service.js';
import { renderMessage } from '../outbound/render.js';
import type { OutboundTransport, SendOutcome } from '../outbound/transport.js';
import type { Sealer } from '../secrets.js';
import { AppError } from '../errors.js';
import { BOUNCE_LABEL } from '../domains/records.js';
import type { SentMessage } from '../mailboxes/service.js';
import type { EventService } from './events.js';
import type { SuppressionService } from './suppressions.js';

type MessageRow = typeof schema.messages.$inferSelect;
const DELIVERY_CONCURRENCY = 20;
type SentRecord = { row: MessageRow; recipients: string[]; response?: string };
const KEY_CACHE_MS = 60_000;
export type DeliveryResult = { sent: number; bounced: number; skipped: number; deferred: string[] };
const bare = (a: string) => (/<([^>]+)>/.exec(a)?.[1] ?? a).toLowerCase();

/**
 * Outbound delivery: renders MIME, DKIM-signs with the domain's key, hands the bytes to the provider,
 * and records the outcome on the message row, the timeline and (on a hard bounce) the suppression list.
 */
export function createDeliveryService(deps: {
  db: Db; transport: OutboundTransport; sealer: Sealer; serviceDomain: string;
  attachments: AttachmentService; events: EventService; suppressions: SuppressionService;
  /** Files what went out into the sender's Sent mailbox (issue 12). */
  fileSent?: (m: SentMessage) => Promise<void>;
}) {
  const { db } = deps;
  const m = schema.messages;

  // Signing keys by domain id, briefly cached: a batch signs many messages of one domain.
  const keys = new Map<string, { at: number; d: typeof schema.domains.$inferSelect | undefined }>();
  async function domainFor(id: string) {
    const hit = keys.get(id);
    if (hit && Date.now() - hit.at < KEY_CACHE_MS) return hit.d;
    const [d] = await db.select().from(schema.domains).where(eq(schema.domains.id, id));
    keys.set(id, { at: Date.now(), d });
    return d;
  }

  async function sign(row: MessageRow, raw: Buffer): Promise<Buffer> {
    if (!row.domainId) return raw;
    const d = await domainFor(row.domainId);
    if (!d) return raw;
    // mailauth's typings describe flat options; the signer reads `signatureData` (one entry per signature).
    const options = {
      canonicalization: 'relaxed/relaxed', algorithm: 'rsa-sha256',
      signatureData: [{ signingDomain: d.domain, selector: d.dkimSelector, privateKey: deps.sealer.open(d.dkimPrivateKeySealed) }],
    } as unknown as DKIMSignOptions;
    const { signatures } = await dkimSign(raw, options);
    return Buffer.concat([Buffer.from(signatures), raw]);
  }

  async function attempt(row: MessageRow): Promise<{ outcome: SendOutcome; smtpMessageId: string }> {
    const attachments = await Promise.all((row.attachments ?? []).map((a) => deps.attachments.loadForSend(row.userId ?? '', a)));
    const domain = bare(row.fromAddr).split('@')[1];
    const rendered = await renderMessage({
      ...row, attachments, serviceDomain: deps.serviceDomain,
      envelopeFrom: row.kind === 'user' && domain ? `bounce+${row.id}@${BOUNCE_LABEL}.${domain}` : undefined,
    });
    const raw = await sign(row, rendered.raw);
    const outcome = await deps.transport.send(row.id, rendered.envelope, raw, row.subject);
    if (outcome.status === 'sent') await deps.fileSent?.({ userId: row.userId, domainId: row.domainId, from: row.fromAddr, raw, messageId: row.id, subject: row.subject, kind: row.kind, headers: row.headers });
    return { outcome, smtpMessageId: rendered.messageId };
  }

  /** Records a final bounce: status, `email.bounced` per address and a suppression for each. */
  async function bounce(row: MessageRow, addresses: string[], diagnostic: string) {
    for (const address of addresses) {
      if (row.userId && row.kind === 'user') {
        await deps.suppressions.add(row.userId, address, 'hard_bounce', { messageId: row.id, detail: diagnostic });
        await deps.events.record({ userId: row.userId, messageId: row.id, domainId: row.domainId, type: 'email.bounced', recipient: address, data: { bounce: { type: 'hard', diagnostic } } });
      }
    }
  }

  /** One attempt at one claimed message; answers whether it was sent, bounced or deferred. */
  /** Records cleanly sent messages of one chunk with one update and one multi-row event insert. */
  async function recordSent(batch: SentRecord[]): Promise<void> {
    if (batch.length === 0) return;
    const at = Date.now();
    await db.update(m).set({
      status: 'sent', sentAt: at, lastError: null, nextAttemptAt: null, attempts: sql`${m.attempts} + 1`, updatedAt: at,
      smtpMessageId: sql`'<' || ${m.id} || ${`@${deps.serviceDomain}>`}`,
    }).where(inArray(m.id, batch.map((b) => b.row.id)));
    const user = batch.filter((b) => b.row.userId && b.row.kind === 'user');
    await deps.events.recordMany(user.map((b) => ({
      userId: b.row.userId!, messageId: b.row.id, domainId: b.row.domainId, type: 'email.sent' as const, data: { to: b.recipients, response: b.response },
    })));
  }

  /** One attempt; a clean success is handed to `sentBatch` for a bulk write when one is given. */
  async function deliver(row: MessageRow, final: boolean, sentBatch?: SentRecord[]): Promise<'sent' | 'bounced' | 'deferred'> {
    let result: { outcome: SendOutcome; smtpMessageId: string };
    try {
      result = await attempt(row);
    } catch (err) {
      // A failure to build (an attachment fetch, say) is temporary when retrying can help.
      const status = err instanceof AppError && err.retryable ? 'temporary' : 'permanent';
      result = { outcome: { status, error: `could not build the message: ${(err as Error).message}` }, smtpMessageId: '' };
    }
    const { outcome } = result;
    const at = Date.now();
    const base = { attempts: sql`${m.attempts} + 1`, updatedAt: at, smtpMessageId: result.smtpMessageId || null };
    const recipients = [...row.toAddrs, ...(row.ccAddrs ?? []), ...(row.bccAddrs ?? [])].map(bare);
    if (outcome.status === 'sent' && sentBatch && !outcome.rejected?.length) {
      sentBatch.push({ row, recipients, response: outcome.response });
      return 'sent';
    }
    if (outcome.status === 'sent') {
      await db.update(m).set({ ...base, status: 'sent', sentAt: at, lastError: null, nextAttemptAt: null }).where(eq(m.id, row.id));
      if (row.userId && row.kind === 'user') await deps.events.record({ userId: row.userId, messageId: row.id, domainId: row.domainId, type: 'email.sent', data: { to: recipients, response: outcome.response } });
      const hard = (outcome.rejected ?? []).filter((r) => r.permanent);
      if (hard.length) await bounce(row, hard.map((r) => r.address.toLowerCase()), hard[0]!.error);
      return 'sent';
    }
    if (outcome.status === 'permanent' || final) {
      await db.update(m).set({ ...base, status: 'bounced', bounceType: 'hard', lastError: outcome.error, nextAttemptAt: null }).where(eq(m.id, row.id));
      await bounce(row, recipients, outcome.error);
      return 'bounced';
    }
    await db.update(m).set({ ...base, status: 'deferred', lastError: outcome.error }).where(eq(m.id, row.id));
    if (row.userId && row.kind === 'user') await deps.events.record({ userId: row.userId, messageId: row.id, domainId: row.domainId, type: 'email.deferred', data: { error: outcome.error } });
    return 'deferred';
  }

  return {
    /** Claims queued rows for `workflowId` and delivers them; idempotent per row (a retry resumes its own claims). */
    async sendQueued(input: { messageIds: string[]; workflowId: string }): Promise<DeliveryResult> {
      const claimed = await db.update(m).set({ status: 'sending', workflowId: input.workflowId, updatedAt: Date.now() })
        .where(and(inArray(m.id, input.messageIds), or(eq(m.status, 'queued'), and(eq(m.status, 'sending'), eq(m.workflowId, input.workflowId)))))
        .returning();
      const result: DeliveryResult = { sent: 0, bounced: 0, skipped: input.messageIds.length - claimed.length, deferred: [] };
      // Several messages at once: each waits mostly on its SMTP round trip, and the transport pools connections.
      for (let i = 0; i < claimed.length; i += DELIVERY_CONCURRENCY) {
        const chunk = claimed.slice(i, i + DELIVERY_CONCURRENCY);
        const sent: SentRecord[] = [];
        const outcomes = await Promise.all(chunk.map((row) => deliver(row, false, sent)));
        await recordSent(sent);
        outcomes.forEach((r, j) => (r === 'deferred' ? result.deferred.push(chunk[j]!.id) : (result[r] += 1)));
      }
      return result;
    },

    /** Ids of outbound rows still `queued` and unclaimed after `olderThanMs`: their batch never started. */
    async findStranded(olderThanMs: number, limit: number): Promise<string[]> {
      const rows = await db.select({ id: m.id }).from(m)
        .where(and(eq(m.status, 'queued'), eq(m.direction, 'outbound'), isNull(m.workflowId), lt(m.createdAt, Date.now() - olderThanMs)))
        .orderBy(asc(m.createdAt)).limit(limit);
      return rows.map((r) => r.id);
    },

    /** A later attempt at a deferred message; `final` turns a temporary failure into a bounce. */
    async retryDeferred(input: { messageId: string; final: boolean; nextAttemptAt: number | null }): Promise<'sent' | 'bounced' | 'deferred' | 'skipped'> {
      const [row] = await db.update(m).set({ status: 'sending', updatedAt: Date.now() })
        .where(and(eq(m.id, input.messageId), inArray(m.status, ['deferred', 'sending']))).returning();
      if (!row) return 'skipped';
      const r = await deliver(row, input.final);
      if (r === 'deferred') await db.update(m).set({ nextAttemptAt: input.nextAttemptAt }).where(eq(m.id, row.id));
      return r;
    },
  };
}
export type DeliveryService = ReturnType<typeof createDeliveryService>;
