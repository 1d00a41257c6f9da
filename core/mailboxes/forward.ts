import type { ParsedMail } from 'mailparser';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import type { AttachmentService } from '../attachments/service.js';
import { AppError } from '../errors.js';
import { newId } from '../ids.js';
import { FORWARD_HEADER } from '../mail/headers.js';
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
};

/**
 * The `forward` route action: the message goes out again from the address it reached, through the
 * ordinary outbound pipeline (a `queued` row, then the delivery workflow), so it is DKIM-signed by the
 * forwarding domain and its return path is that domain's (`bounce+<msg>@bounces.<domain>`, SRS-style:
 * bounces come back to us, not to the original sender). The original travels attached as message/rfc822.
 * A forward passes the send gate like any other outgoing message: an account that may not send (not
 * verified, suspended) or has no room under its caps gets the outbound row as `failed`, its `last_error`
 * saying why, and nothing goes out. The inbound message itself is accepted and delivered as usual.
 */
export function createForwarder(deps: {
  db: Db;
  attachments: AttachmentService;
  queue: OutboundQueue;
  gate: SendGate;
}) {
  const { db } = deps;
  return {
    async forward(f: Forward): Promise<string> {
      const sender = f.mail.from?.text ?? f.envelopeFrom;
      const subject = f.mail.subject ?? '';
      const now = Date.now();
      const row: typeof schema.messages.$inferInsert = {
        id: newId('msg'),
        userId: f.userId,
        direction: 'outbound',
        kind: 'user',
        domainId: f.domainId,
        fromAddr: f.rcpt,
        toAddrs: [f.destination],
        replyTo: f.mail.from?.value[0]?.address ?? null,
        subject: /^fwd?:/i.test(subject) ? subject : `Fwd: ${subject}`,
        text: `---------- Forwarded message ----------\nFrom: ${sender}\nDate: ${f.mail.date?.toUTCString() ?? ''}\nSubject: ${subject}\nTo: ${f.rcpt}\n\n${f.mail.text ?? ''}`,
        headers: { [FORWARD_HEADER]: f.rcpt },
        status: 'queued',
        createdAt: now,
        updatedAt: now,
      };
      // The account's standing first: a refused forward stores no copy of the original.
      const verdict = await deps.gate.judge({ userId: f.userId });
      const refusal = verdict instanceof AppError ? verdict : await insertCounted(f, row, verdict.plan);
      if (refusal) {
        await db.insert(schema.messages).values({ ...row, status: 'failed', lastError: refusalNote(refusal) });
        return row.id!;
      }
      deps.queue.enqueue([row.id!], f.userId);
      return row.id!;
    },
  };

  /** Attaches the original and inserts the row with its recipient reserved under the caps; answers the cap's refusal instead. */
  async function insertCounted(
    f: Forward,
    row: typeof schema.messages.$inferInsert,
    plan: string,
  ): Promise<AppError | undefined> {
    const [original] = await deps.attachments.prepareForSend(f.userId, [
      { filename: 'forwarded-message.eml', content: f.raw.toString('base64'), contentType: 'message/rfc822' },
    ]);
    return db.transaction(async (tx) => {
      const capped = await deps.gate.reserve(tx, f.userId, plan, 1);
      if (!capped) await tx.insert(schema.messages).values({ ...row, attachments: [original!] });
      return capped;
    });
  }
}
export type Forwarder = ReturnType<typeof createForwarder>;
