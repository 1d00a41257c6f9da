import type { Resolver } from 'node:dns/promises';
import type { ParsedMail } from 'mailparser';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import type { AttachmentService } from '../attachments/service.js';
import { AppError } from '../errors.js';
import { newId } from '../ids.js';
import { FORWARD_HEADER, FORWARD_MODE_HEADER } from '../mail/headers.js';
import type { Srs } from '../mail/srs.js';
import { dmarcPolicy, forwardBytes, rewritesFrom, viaName } from './forward-rewrite.js';
import type { OutboundQueue } from '../transport/queue.js';
import { refusalNote, type SendGate } from '../gate/gate.js';

type Forward = {
  userId: string;
  domainId: string;
  rcpt: string;
  destination: string;
  raw: Buffer;
  mail: ParsedMail;
  envelopeFrom: string;
  /** A message made by `POST /v1/route`: its From is the caller's word only, so it is always rewritten. */
  made?: boolean;
};

/**
 * The `forward` route action: the original message goes out again, as it came, to the destination,
 * through the ordinary outbound pipeline (a `queued` row whose one attachment holds the bytes to send,
 * then the delivery workflow), DKIM-signed by the forwarding domain, with:
 * - the envelope sender rewritten with SRS (core/mail/srs.ts) to `SRS0=…@<forwarding domain>`, so the
 *   destination's SPF check is of the forwarding domain, and a bounce comes back here to be returned to
 *   the original sender (core/inbound/srs-bounce.ts); a null sender (a bounce being forwarded) keeps the
 *   forwarding domain's own return path `bounce+<msg>@bounces.<domain>`;
 * - when the original From domain publishes DMARC `p=quarantine` or `p=reject`, From rewritten to
 *   `"<name> via <forwarding domain>" <forwarding address>` and the original From kept as `Reply-To`, as
 *   mailing lists do, so the destination's DMARC check is of the forwarding domain (aligned by SPF and by
 *   our DKIM signature); other senders' From is left alone (their own DKIM signature still verifies);
 * - `X-Svc-Forwarded-For` first, so a message we forwarded once is not forwarded again.
 * A forward passes the send gate like any other outgoing message: an account that may not send (not
 * verified, suspended) or has no room under its caps gets the outbound row as `failed`, its `last_error`
 * saying why, and nothing goes out. The inbound message itself is accepted and delivered as usual.
 */
export function createForwarder(deps: {
  db: Db;
  attachments: AttachmentService;
  queue: OutboundQueue;
  gate: SendGate;
  resolver: Resolver;
  srs: Srs;
}) {
  const { db } = deps;
  return {
    async forward(f: Forward): Promise<string> {
      const forwardingDomain = f.rcpt.slice(f.rcpt.lastIndexOf('@') + 1);
      const author = f.mail.from?.value[0];
      const authorDomain = author?.address?.slice(author.address.lastIndexOf('@') + 1) ?? '';
      // A message made through the API names any From it likes: it never leaves with a From we did not verify.
      const strict =
        f.made === true || (authorDomain ? rewritesFrom(await dmarcPolicy(deps.resolver, authorDomain)) : false);
      const from =
        strict && author?.address ? `${viaName(author.name, author.address, forwardingDomain)} <${f.rcpt}>` : undefined;
      const bytes = forwardBytes(f.raw, { forwardedFor: f.rcpt, ...(from ? { from } : {}) });
      const srsSender = deps.srs.forward(f.envelopeFrom, forwardingDomain);
      const now = Date.now();
      const row: typeof schema.messages.$inferInsert = {
        id: newId('msg'),
        userId: f.userId,
        direction: 'outbound',
        kind: 'user',
        domainId: f.domainId,
        fromAddr: f.rcpt,
        toAddrs: [f.destination],
        replyTo: author?.address ?? null,
        subject: f.mail.subject ?? '',
        text: null,
        headers: { [FORWARD_HEADER]: f.rcpt, [FORWARD_MODE_HEADER]: 'resend' },
        // A null or unreadable sender: the domain's own return path (core/outbound/delivery.ts).
        envelopeFrom: srsSender.toLowerCase().endsWith(`@${forwardingDomain.toLowerCase()}`) ? srsSender : null,
        status: 'queued',
        createdAt: now,
        updatedAt: now,
      };
      return submit(f.userId, row, bytes);
    },

    /**
     * A bounce (or any mail) to the SRS address of a forward (checked by the ingress: hash and age) goes on
     * to the original sender, as it came, `X-Svc-Forwarded-For` first: from the forwarding domain (signed
     * with its key, its own return path, through the send gate and the caps like a forward).
     */
    async returnToSender(b: {
      userId: string;
      domainId: string;
      srsAddress: string;
      original: string;
      raw: Buffer;
      mail: ParsedMail;
    }): Promise<string> {
      const now = Date.now();
      const row: typeof schema.messages.$inferInsert = {
        id: newId('msg'),
        userId: b.userId,
        direction: 'outbound',
        kind: 'user',
        domainId: b.domainId,
        fromAddr: b.srsAddress,
        toAddrs: [b.original],
        subject: b.mail.subject ?? '',
        headers: { [FORWARD_HEADER]: b.srsAddress, [FORWARD_MODE_HEADER]: 'resend' },
        status: 'queued',
        createdAt: now,
        updatedAt: now,
      };
      return submit(b.userId, row, forwardBytes(b.raw, { forwardedFor: b.srsAddress }));
    },
  };

  /** The gate, then the row (failed with the reason when refused), then the delivery workflow. */
  async function submit(userId: string, row: typeof schema.messages.$inferInsert, bytes: Buffer): Promise<string> {
    // The account's standing first: a refused forward stores no copy of the original.
    const verdict = await deps.gate.judge({ userId });
    const refusal = verdict instanceof AppError ? verdict : await insertCounted(userId, row, verdict.plan, bytes);
    if (refusal) {
      await db.insert(schema.messages).values({ ...row, status: 'failed', lastError: refusalNote(refusal) });
      return row.id!;
    }
    deps.queue.enqueue([row.id!], userId);
    return row.id!;
  }

  /** Attaches the bytes to send and inserts the row with its recipient reserved under the caps; answers the cap's refusal instead. */
  async function insertCounted(
    userId: string,
    row: typeof schema.messages.$inferInsert,
    plan: string,
    bytes: Buffer,
  ): Promise<AppError | undefined> {
    const [original] = await deps.attachments.prepareForSend(userId, [
      { filename: 'forwarded-message.eml', content: bytes.toString('base64'), contentType: 'message/rfc822' },
    ]);
    return db.transaction(async (tx) => {
      const capped = await deps.gate.reserve(tx, userId, plan, 1);
      if (!capped) await tx.insert(schema.messages).values({ ...row, attachments: [original!] });
      return capped;
    });
  }
}
export type Forwarder = ReturnType<typeof createForwarder>;
