import { randomUUID } from 'node:crypto';
import type { Transform } from 'node:stream';
import { Encoder as Base64Encoder } from 'nodemailer/lib/base64';
import MailComposer from 'nodemailer/lib/mail-composer';
import type MimeNode from 'nodemailer/lib/mime-node';
import { Encoder as QpEncoder } from 'nodemailer/lib/qp';

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
    // The multipart boundaries' shared random part (the root's, which every part's boundary uses), from
    // randomUUID's buffered entropy rather than a synchronous read of the system's random source.
    baseBoundary: randomUUID().replaceAll('-', '').slice(0, 16),
  });
  const node = composer.compile();
  const envelope = node.getEnvelope() as { from: string; to: string[] };
  if (m.envelopeFrom) envelope.from = m.envelopeFrom;
  const raw = serializeMime(node) ?? (await node.build());
  return { raw, envelope, messageId };
}

/** The parts of a compiled MIME node `serialize` reads (nodemailer's MimeNode, whose stream these mirror). */
type Node = {
  buildHeaders(): string;
  getTransferEncoding(): string;
  contentType?: string;
  content?: unknown;
  multipart?: string | false;
  boundary?: string;
  childNodes: Node[];
  newline?: string;
  _raw?: unknown;
  _transforms: unknown[];
  _processFuncs: unknown[];
};

/** Whether every node of the tree holds its content in memory and asks for no transform (else: nodemailer's stream). */
const plain = (n: Node): boolean =>
  !n._raw &&
  !n.newline &&
  n._transforms.length === 0 &&
  n._processFuncs.length === 0 &&
  (n.content === undefined || n.content === null || typeof n.content === 'string' || Buffer.isBuffer(n.content)) &&
  n.childNodes.every(plain);

/** Runs one of nodemailer's content encoders over `input` at once, without a stream around it. */
function encodeWith(encoder: Transform, input: Buffer): Buffer[] {
  const out: Buffer[] = [];
  const t = encoder as unknown as {
    push(chunk: Buffer | string, enc?: BufferEncoding): boolean;
    _transform(chunk: Buffer, enc: string, done: (err?: Error | null) => void): void;
    _flush(done: (err?: Error | null) => void): void;
  };
  t.push = (chunk, enc) => (out.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk, enc ?? 'utf8')), true);
  const fail = (err?: Error | null) => {
    if (err) throw err;
  };
  t._transform(input, 'buffer', fail);
  t._flush(fail);
  return out;
}

/**
 * The bytes nodemailer's `build()` gives for a compiled message whose content is all in memory, made in
 * one pass: the same headers (its `buildHeaders`), the same content encoders (base64, quoted-printable,
 * driven directly), the same boundaries and final line break. `build()` makes them through a stream per
 * node and a turn of the event loop per part, which costs several times the work. Undefined when some
 * node's content is not in memory (a stream, a file, a URL) or a transform is asked for: `build()` then.
 */
export function serializeMime(root: MimeNode): Buffer | undefined {
  const top = root as unknown as Node;
  if (!plain(top)) return undefined;
  const out: Buffer[] = [];
  const write = (s: string) => out.push(Buffer.from(s));
  const walk = (n: Node) => {
    write(`${n.buildHeaders()}\r\n\r\n`);
    if (n.content !== undefined && n.content !== null) {
      const content = n.content as string | Buffer;
      const bytes = Buffer.isBuffer(content) ? content : Buffer.from(content || '');
      const encoding = n.getTransferEncoding();
      if (encoding === 'base64') out.push(...encodeWith(new Base64Encoder({}), bytes));
      else if (encoding === 'quoted-printable')
        // Outside text a lone CR or LF is data (nodemailer's `binary`), kept encoded.
        out.push(...encodeWith(new QpEncoder({ binary: !/^text\//i.test(n.contentType || '') }), bytes));
      else out.push(bytes);
    }
    if (!n.multipart) return;
    n.childNodes.forEach((child, i) => {
      write(`${i > 0 ? '\r\n' : ''}--${n.boundary}\r\n`);
      walk(child);
    });
    write(`\r\n--${n.boundary}--\r\n`);
  };
  walk(top);
  const raw = Buffer.concat(out);
  // nodemailer's LastNewline: the message ends with a line break.
  const last = raw[raw.length - 1];
  if (last === 0x0a) return raw;
  return Buffer.concat([raw, Buffer.from(last === 0x0d ? '\n' : '\r\n')]);
}

/** The caller's headers without any Feedback-ID of theirs, plus the service's when there is one. */
function withFeedbackId(headers: Record<string, string> | undefined, feedbackId: string | undefined) {
  if (!feedbackId) return headers;
  const kept = Object.entries(headers ?? {}).filter(([name]) => name.toLowerCase() !== 'feedback-id');
  return { ...Object.fromEntries(kept), 'Feedback-ID': feedbackId };
}
