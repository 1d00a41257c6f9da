import type { ParsedMail } from 'mailparser';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import type { AttachmentService } from '../attachments/service.js';
import { newId } from '../ids.js';
import type { OutboundQueue } from '../outbound/queue.js';

/** Header marking a forward, so it is not filed into the forwarding address's Sent folder. */
export const FORWARD_HEADER = 'X-Svc-Forwarded-For';

/**
 * The `forward` route action: the message goes out again from the address it reached, through the
 * ordinary outbound pipeline (a `queued` row, then the delivery workflow), so it is DKIM-signed by the
 * forwarding domain and its return path is that domain's (`bounce+<msg>@bounces.<domain>`, SRS-style:
 * bounces come back to us, not to the original sender). The original travels attached as message/rfc822.
 */
export function createForwarder(deps: { db: Db; attachments: AttachmentService; queue: OutboundQueue }) {
  return {
    async forward(f: { userId: string; domainId: string; rcpt: string; destination: string; raw: Buffer; mail: ParsedMail; envelopeFrom: string }): Promise<string> {
      const [original] = await deps.attachments.prepareForSend(f.userId, [{ filename: 'forwarded-message.eml', content: f.raw.toString('base64'), contentType: 'message/rfc822' }]);
      const sender = f.mail.from?.text ?? f.envelopeFrom;
      const subject = f.mail.subject ?? '';
      const now = Date.now();
      const id = newId('msg');
      await deps.db.insert(schema.messages).values({
        id, userId: f.userId, direction: 'outbound', kind: 'user', domainId: f.domainId, fromAddr: f.rcpt, toAddrs: [f.destination],
        replyTo: f.mail.from?.value[0]?.address ?? null, subject: /^fwd?:/i.test(subject) ? subject : `Fwd: ${subject}`,
        text: `---------- Forwarded message ----------\nFrom: ${sender}\nDate: ${f.mail.date?.toUTCString() ?? ''}\nSubject: ${subject}\nTo: ${f.rcpt}\n\n${f.mail.text ?? ''}`,
        headers: { [FORWARD_HEADER]: f.rcpt }, attachments: [original!], status: 'queued', createdAt: now, updatedAt: now,
      });
      deps.queue.enqueue([id]);
      return id;
    },
  };
}
export type Forwarder = ReturnType<typeof createForwarder>;
