import libmime from 'libmime';
import { simpleParser, type AddressObject, type EmailAddress } from 'mailparser';
import { AppError, badRequest } from '../errors.js';

/**
 * A message handed to the submission server, read as the send it asks for (runs in the parse pool: pure,
 * no database, no network). The headers below are the API's fields by another name: they are honoured and
 * never delivered. Every other `X-Svc-` header is dropped too; headers the service writes itself (the
 * envelope's, the MIME structure's, Message-ID, Date, DKIM-Signature) are rebuilt, and `Bcc` is never kept.
 */
export const CONTROL_HEADERS = {
  'x-svc-metadata': 'metadata: a JSON object (at most 20 keys; string values up to 512 characters)',
  'x-svc-track-opens': 'trackOpens: true or false',
  'x-svc-track-clicks': 'trackClicks: true or false',
  'x-svc-template': 'templateId: a tpl_… or base_… id (the message body, when empty, comes from the template)',
  'x-svc-template-data': 'templateData: a JSON object of values for the merge tags',
  'x-svc-scheduled-at': 'scheduledAt: ISO 8601, ms epoch, or text like "in 2 hours"',
} as const;

/** Headers the send path writes itself: a submitted copy of them is not passed on. */
const REBUILT = new Set([
  'from',
  'to',
  'cc',
  'bcc',
  'subject',
  'reply-to',
  'in-reply-to',
  'message-id',
  'date',
  'sender',
  'mime-version',
  'content-type',
  'content-transfer-encoding',
  'content-disposition',
  'content-id',
  'content-length',
  'dkim-signature',
  'received',
  'return-path',
  'delivered-to',
  'authentication-results',
  'arc-seal',
  'arc-message-signature',
  'arc-authentication-results',
]);

/** The bounds `/v1/send` puts on the same fields (api/ops/send.ts), for a message that arrives as MIME. */
export const SEND_BOUNDS = { subjectChars: 998, bodyChars: 5_000_000, attachments: 20 } as const;

/** Most headers of its own a submitted message may carry through, and the longest value of one. */
export const MAX_PASSED_HEADERS = 50;
const MAX_HEADER_VALUE = 4000;

export type SubmittedAttachment = { filename: string; contentType: string; content: Uint8Array; cid?: string };
export type Submitted = {
  from: string;
  to: string[];
  cc: string[];
  bcc: string[];
  replyTo?: string;
  subject?: string;
  html?: string;
  text?: string;
  inReplyTo?: string;
  headers: Record<string, string>;
  metadata?: Record<string, string | number | boolean | null>;
  templateId?: string;
  templateData?: Record<string, string | number | boolean | null>;
  scheduledAt?: string;
  trackOpens?: boolean;
  trackClicks?: boolean;
  attachments: SubmittedAttachment[];
};

type Scalar = string | number | boolean | null;
const isScalar = (v: unknown): v is Scalar =>
  v === null || typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean';

/** A header's JSON object of scalars, or a 400 naming the header. */
function jsonObject(name: string, value: string): Record<string, Scalar> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    throw badRequest(`${name}: not valid JSON`, 'invalid_header');
  }
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed))
    throw badRequest(`${name}: must be a JSON object`, 'invalid_header');
  const out: Record<string, Scalar> = {};
  for (const [k, v] of Object.entries(parsed)) {
    if (!isScalar(v)) throw badRequest(`${name}.${k}: values are strings, numbers, booleans or null`, 'invalid_header');
    out[k] = v;
  }
  return out;
}

/** The API's metadata rules (api/ops/send.ts), for the header that carries it. */
function metadataOf(value: string): Record<string, Scalar> {
  const m = jsonObject('X-Svc-Metadata', value);
  const keys = Object.keys(m);
  if (keys.length > 20) throw badRequest('X-Svc-Metadata: at most 20 keys', 'invalid_header');
  for (const k of keys) {
    if (k.length === 0 || k.length > 64)
      throw badRequest('X-Svc-Metadata: keys are 1 to 64 characters', 'invalid_header');
    const v = m[k];
    if (typeof v === 'string' && v.length > 512)
      throw badRequest('X-Svc-Metadata: string values are at most 512 characters', 'invalid_header');
  }
  return m;
}

function flag(name: string, value: string): boolean {
  const v = value.trim().toLowerCase();
  if (['true', 'yes', '1', 'on'].includes(v)) return true;
  if (['false', 'no', '0', 'off'].includes(v)) return false;
  throw badRequest(`${name}: true or false`, 'invalid_header');
}

/** Every mailbox of an address header (groups flattened). */
function mailboxes(field: AddressObject | AddressObject[] | undefined): EmailAddress[] {
  const out: EmailAddress[] = [];
  const walk = (list: EmailAddress[]) => {
    for (const a of list) {
      if (a.group) walk(a.group);
      else if (a.address) out.push(a);
    }
  };
  for (const o of Array.isArray(field) ? field : field ? [field] : []) walk(o.value);
  return out;
}

const display = (a: EmailAddress) => (a.name ? `"${a.name.replace(/["\\]/g, '\\$&')}" <${a.address}>` : a.address!);

/** A header line's name as written and its value unfolded (RFC 5322 §2.2.3). */
function splitLine(line: string): [string, string] | undefined {
  const colon = line.indexOf(':');
  if (colon <= 0) return undefined;
  return [
    line.slice(0, colon).trim(),
    line
      .slice(colon + 1)
      .replace(/\r?\n/g, '')
      .trim(),
  ];
}

/**
 * Reads a submitted message as a send. Recipients come from the envelope: a `To` or `Cc` mailbox is kept in
 * its header when it is also an envelope recipient, and every other envelope recipient is a blind one (the
 * header names never reach anyone the client did not give at RCPT TO, and `Bcc` never reaches a header).
 */
export async function readSubmission(raw: Buffer, envelope: { from: string; rcpts: string[] }): Promise<Submitted> {
  const mail = await simpleParser(raw, {
    skipTextToHtml: true,
    skipHtmlToText: true,
    skipImageLinks: true,
  }).catch((err: unknown) => {
    if (err instanceof RangeError || !(err instanceof Error)) throw err;
    throw new AppError(422, 'unparseable_message', `The message could not be parsed: ${err.message.slice(0, 200)}`);
  });
  const rcpts = new Set(envelope.rcpts.map((r) => r.toLowerCase()));
  const placed = new Set<string>();
  const keep = (list: EmailAddress[]) =>
    list.filter((a) => {
      const address = a.address!.toLowerCase();
      if (!rcpts.has(address) || placed.has(address)) return false;
      placed.add(address);
      return true;
    });
  const to = keep(mailboxes(mail.to)).map(display);
  const cc = keep(mailboxes(mail.cc)).map(display);
  const bcc = [...rcpts].filter((r) => !placed.has(r));

  const fromBox = mailboxes(mail.from)[0];
  const from = fromBox ? display(fromBox) : envelope.from;
  if (!from) throw badRequest('The message has no From header and no envelope sender', 'invalid_address');

  const out: Submitted = { from, to, cc, bcc, headers: {}, attachments: [] };
  const seen = new Set<string>(); // a header passed on once: its first occurrence
  for (const { key, line } of mail.headerLines) {
    const split = splitLine(line);
    if (!split) continue;
    const [name, encoded] = split;
    const lower = key;
    // Encoded words (RFC 2047: nodemailer writes JSON that way) are decoded; the composer encodes again on the way out.
    const value = libmime.decodeWords(encoded);
    if (lower.startsWith('x-svc-')) {
      if (lower === 'x-svc-metadata') out.metadata = metadataOf(value);
      else if (lower === 'x-svc-track-opens') out.trackOpens = flag(name, value);
      else if (lower === 'x-svc-track-clicks') out.trackClicks = flag(name, value);
      else if (lower === 'x-svc-template') out.templateId = value;
      else if (lower === 'x-svc-template-data') out.templateData = jsonObject(name, value);
      else if (lower === 'x-svc-scheduled-at') out.scheduledAt = value;
      continue;
    }
    if (REBUILT.has(lower) || seen.has(lower)) continue;
    seen.add(lower);
    if (Object.keys(out.headers).length >= MAX_PASSED_HEADERS)
      throw badRequest(`At most ${MAX_PASSED_HEADERS} headers of its own may go with a message`, 'invalid_header');
    if (value.length > MAX_HEADER_VALUE || !/^[!-9;-~]+$/.test(name))
      throw badRequest(`${name}: not a header the service can pass on`, 'invalid_header');
    out.headers[name] = value;
  }
  const reply = mailboxes(mail.replyTo)[0];
  if (reply) out.replyTo = display(reply);
  if (mail.subject) out.subject = mail.subject.replace(/[\r\n]+/g, ' ');
  if (mail.inReplyTo) out.inReplyTo = mail.inReplyTo;
  if (typeof mail.html === 'string' && mail.html.trim()) out.html = mail.html;
  if (mail.text?.trim()) out.text = mail.text;
  if ((out.subject?.length ?? 0) > SEND_BOUNDS.subjectChars)
    throw badRequest(`The Subject is longer than ${SEND_BOUNDS.subjectChars} characters`, 'content_too_large');
  for (const part of ['html', 'text'] as const)
    if ((out[part]?.length ?? 0) > SEND_BOUNDS.bodyChars)
      throw badRequest(`The ${part} body is longer than ${SEND_BOUNDS.bodyChars} characters`, 'content_too_large');
  if (mail.attachments.length > SEND_BOUNDS.attachments)
    throw badRequest(`At most ${SEND_BOUNDS.attachments} attachments (inline parts included)`, 'too_many_attachments');
  // A template sends with its own body unless the message has one (as on the API, explicit fields win).
  for (const a of mail.attachments) {
    out.attachments.push({
      filename: a.filename ?? (a.cid ? `${a.cid}` : 'attachment'),
      contentType: a.contentType || 'application/octet-stream',
      content: a.content,
      // An inline part (multipart/related, or disposition inline) keeps its Content-ID, so `cid:` links still find it.
      ...(a.cid && (a.related || a.contentDisposition === 'inline') ? { cid: a.cid } : {}),
    });
  }
  return out;
}
