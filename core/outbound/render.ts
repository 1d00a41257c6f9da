import MailComposer from 'nodemailer/lib/mail-composer';

export type RenderInput = {
  id: string; fromAddr: string; toAddrs: string[]; ccAddrs?: string[] | null; bccAddrs?: string[] | null;
  replyTo?: string | null; subject?: string | null; html?: string | null; text?: string | null;
  headers?: Record<string, string> | null; serviceDomain: string;
};
export type Rendered = { raw: Buffer; envelope: { from: string; to: string[] }; messageId: string };

/** Builds the RFC 5322 bytes of a message and its SMTP envelope; Bcc goes into the envelope only. */
export async function renderMessage(m: RenderInput): Promise<Rendered> {
  const messageId = `<${m.id}@${m.serviceDomain}>`;
  const composer = new MailComposer({
    from: m.fromAddr, to: m.toAddrs, cc: m.ccAddrs ?? undefined, bcc: m.bccAddrs ?? undefined,
    replyTo: m.replyTo ?? undefined, subject: m.subject ?? '', text: m.text ?? undefined, html: m.html ?? undefined,
    messageId, headers: m.headers ?? undefined,
  });
  const node = composer.compile();
  const envelope = node.getEnvelope() as { from: string; to: string[] };
  const raw = await node.build();
  return { raw, envelope, messageId };
}
