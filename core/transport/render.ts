import MailComposer from 'nodemailer/lib/mail-composer';

export type RenderInput = {
  id: string;
  fromAddr: string;
  toAddrs: string[];
  ccAddrs?: string[] | null;
  bccAddrs?: string[] | null;
  replyTo?: string | null;
  subject?: string | null;
  html?: string | null;
  text?: string | null;
  headers?: Record<string, string> | null;
  inReplyTo?: string | null;
  attachments?: { filename: string; contentType: string; content: Buffer; cid?: string }[];
  envelopeFrom?: string;
  serviceDomain: string;
  /** Gmail's Feedback-ID (core/mail/feedback-id.ts); it replaces any caller header of that name. */
  feedbackId?: string;
};
export type Rendered = { raw: Buffer; envelope: { from: string; to: string[] }; messageId: string };

/**
 * Builds the RFC 5322 bytes of a message and its SMTP envelope (Bcc goes into the envelope only).
 * Threading headers come first; the caller's `headers` are applied last, so the caller wins, except
 * for Feedback-ID: the service's is kept, so a caller cannot file complaints under another account.
 */
export async function renderMessage(m: RenderInput): Promise<Rendered> {
  const messageId = `<${m.id}@${m.serviceDomain}>`;
  // The composer's threading options would overwrite same-named caller headers; the caller wins, so skip those.
  const headers = withFeedbackId(m.headers ?? undefined, m.feedbackId);
  const callerSets = new Set(Object.keys(headers ?? {}).map((h) => h.toLowerCase()));
  const threading = m.inReplyTo
    ? {
        ...(callerSets.has('in-reply-to') ? {} : { inReplyTo: m.inReplyTo }),
        ...(callerSets.has('references') ? {} : { references: m.inReplyTo }),
      }
    : {};
  const composer = new MailComposer({
    from: m.fromAddr,
    to: m.toAddrs,
    cc: m.ccAddrs ?? undefined,
    bcc: m.bccAddrs ?? undefined,
    replyTo: m.replyTo ?? undefined,
    subject: m.subject ?? '',
    text: m.text ?? undefined,
    html: m.html ?? undefined,
    messageId,
    ...threading,
    attachments: m.attachments,
    headers,
  });
  const node = composer.compile();
  const envelope = node.getEnvelope() as { from: string; to: string[] };
  if (m.envelopeFrom) envelope.from = m.envelopeFrom;
  const raw = await node.build();
  return { raw, envelope, messageId };
}

/** The caller's headers without any Feedback-ID of theirs, plus the service's when there is one. */
function withFeedbackId(headers: Record<string, string> | undefined, feedbackId: string | undefined) {
  if (!feedbackId) return headers;
  const kept = Object.entries(headers ?? {}).filter(([name]) => name.toLowerCase() !== 'feedback-id');
  return { ...Object.fromEntries(kept), 'Feedback-ID': feedbackId };
}
