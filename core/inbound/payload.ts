import type { ParsedMail, AddressObject } from 'mailparser';
import type { EmailReceivedPayload } from '../webhooks/payload-schemas.js';
import type { SpamVerdict } from '../spam/rspamd.js';

export type Party = { address: string; name?: string };
export type InboundAttachment = {
  id: string;
  filename: string;
  contentType: string;
  size: number;
  url?: string;
  content?: string;
};

const firstAddress = (a: AddressObject | AddressObject[] | undefined): Party | undefined => {
  const v = (Array.isArray(a) ? a[0] : a)?.value[0];
  if (!v?.address) return undefined;
  return v.name ? { address: v.address.toLowerCase(), name: v.name } : { address: v.address.toLowerCase() };
};

/** The conversation root of a message: first References id, else In-Reply-To, else its own Message-ID. */
export function threadIdOf(mail: ParsedMail): string | null {
  const refs = Array.isArray(mail.references) ? mail.references : mail.references ? [mail.references] : [];
  return refs[0] ?? mail.inReplyTo ?? mail.messageId ?? null;
}

/** DESIGN.md `email.received` payload, without `to` (each delivery adds the RCPT it carries). */
export function receivedPayload(m: {
  id: string;
  mail: ParsedMail;
  envelopeFrom: string;
  receivedAt: number;
  auth: Record<string, string | null>;
  /** rspamd's verdict (absent on payloads stored before scoring). */
  spam?: SpamVerdict;
  attachments: InboundAttachment[];
}): Omit<EmailReceivedPayload, 'to'> & { type: 'email.received'; from: Party } {
  const from = firstAddress(m.mail.from) ?? { address: m.envelopeFrom.toLowerCase() };
  return {
    id: m.id,
    type: 'email.received' as const,
    from,
    subject: m.mail.subject ?? '',
    text: m.mail.text ?? '',
    html: typeof m.mail.html === 'string' ? m.mail.html : null,
    threadId: threadIdOf(m.mail),
    receivedAt: m.receivedAt,
    receivedAtIso: new Date(m.receivedAt).toISOString(),
    auth: {
      spf: m.auth.spf ?? null,
      dkim: m.auth.dkim ?? null,
      dmarc: m.auth.dmarc ?? null,
      spam: m.auth.spam ?? null,
      arc: m.auth.arc ?? null,
    },
    ...(m.spam ? { spam: m.spam } : {}),
    attachments: m.attachments,
  };
}
