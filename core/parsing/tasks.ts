/**
 * The work the parse pool runs (core/parsing/pool.ts): every parser whose cost on outside bytes is large
 * or could grow faster than linearly. These functions run inside a worker thread: they take and answer
 * structured-cloneable values only (a Buffer arrives as a Uint8Array), touch no database and no network,
 * and import only pure modules.
 */
import { simpleParser, type ParsedMail } from 'mailparser';
import { renderForRecipient, type BroadcastContent, type Recipient } from '../render/broadcast.js';
import { parseCsvRows } from './csv-rows.js';
import { AppError } from '../errors.js';
import { parseReport } from './reports.js';
import { parseDmarcMail } from './dmarc.js';
import { parseTlsReportMail } from './tls-report.js';
import type { AggregateBounds } from './aggregate-types.js';
import { readSubmission } from './submission.js';
import { composeContent } from '../render/compose.js';
import { createTracking } from '../render/tracking.js';
import type { MergeData } from '../render/merge.js';

const asBuffer = (bytes: Uint8Array) => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);

/** Most characters a merged subject, html or text may have: merging multiplies values by tags (`{{v}}` 100,000 times). */
export const MAX_MERGED_CHARS = 10 * 1024 * 1024;

/** Refuses content whose merge grew past MAX_MERGED_CHARS (422 `content_too_large`), before it is cloned back or stored. */
function capMerged<T extends { subject: string; html: string | null; text: string | null }>(content: T): T {
  for (const field of ['subject', 'html', 'text'] as const) {
    const length = content[field]?.length ?? 0;
    if (length > MAX_MERGED_CHARS) {
      throw new AppError(
        422,
        'content_too_large',
        `${field} after merge tags are filled is ${length} characters; at most ${MAX_MERGED_CHARS}`,
      );
    }
  }
  return content;
}
type Template = { subject: string | null; html: string | null; text: string | null };

/**
 * mailparser's refusals of a message (more than its child parts, a header block past its size): the input's
 * doing, so a permanent 422 `unparseable_message`, not a failure to retry. V8's own limits
 * (RangeError) are answered by worker.ts.
 */
const unparseable = (err: unknown): never => {
  if (err instanceof RangeError || !(err instanceof Error)) throw err;
  throw new AppError(422, 'unparseable_message', `The message could not be parsed: ${err.message.slice(0, 200)}`);
};

export const tasks = {
  /**
   * Inbound mail, parsed by mailparser as the webhook payload, mailboxes and forwards read it. What nothing
   * reads is neither made (`textAsHtml`) nor cloned back (`headerLines`, the raw header lines again).
   */
  async parseMail(raw: Uint8Array): Promise<ParsedMail> {
    const mail = await simpleParser(asBuffer(raw), { skipTextToHtml: true }).catch(unparseable);
    mail.headerLines = [];
    return mail;
  },

  /** The Subject of a message (IMAP APPEND, sent-mail filing): no body conversions. */
  async mailSubject(raw: Uint8Array): Promise<string | null> {
    const mail = await simpleParser(asBuffer(raw), {
      skipHtmlToText: true,
      skipTextToHtml: true,
      skipImageLinks: true,
    });
    return mail.subject ?? null;
  },

  /** A bounce or complaint report arriving at a return path (null when the mail is not one). */
  async parseReport(input: { raw: Uint8Array; envelopeTo: string[]; serviceDomain: string }) {
    return parseReport(asBuffer(input.raw), { envelopeTo: input.envelopeTo, serviceDomain: input.serviceDomain });
  },

  /** A DMARC aggregate report mailed to dmarc@SERVICE_DOMAIN: XML plain, gzip or zip, within `bounds`. */
  async parseDmarcReport(input: { raw: Uint8Array; bounds: AggregateBounds }) {
    return parseDmarcMail(asBuffer(input.raw), input.bounds);
  },

  /** A TLS report (RFC 8460) mailed to tlsrpt@SERVICE_DOMAIN: JSON plain or gzip, within `bounds`. */
  async parseTlsReport(input: { raw: Uint8Array; bounds: AggregateBounds }) {
    return parseTlsReportMail(asBuffer(input.raw), input.bounds);
  },

  /** Copies of one broadcast for a batch of recipients (merge tags, preview, footer). */
  async renderBroadcast(input: {
    content: BroadcastContent;
    recipients: { recipient: Recipient; unsubscribeUrl: string }[];
  }) {
    return input.recipients.map((r) => capMerged(renderForRecipient(input.content, r.recipient, r.unsubscribeUrl)));
  },

  /**
   * One send's content: template and request fields merged, merge tags filled, then links rewritten and
   * the open pixel placed when tracking is on. The tracking key travels with the task: the thread is ours.
   */
  async renderSend(input: {
    explicit: { subject?: string; html?: string; text?: string };
    template?: Template;
    data?: MergeData;
    tracking?: { publicUrl: string; secretKey: string; messageId: string; opens: boolean; clicks: boolean };
  }) {
    const content = capMerged(composeContent(input.explicit, input.template, input.data));
    const t = input.tracking;
    if (!t || content.html === null || (!t.opens && !t.clicks)) return content;
    const html = createTracking(t).instrumentHtml(content.html, t.messageId, { opens: t.opens, clicks: t.clicks });
    return { ...content, html };
  },

  /** A message handed to the submission server, read as the send it asks for (core/parsing/submission.ts). */
  async readSubmission(input: { raw: Uint8Array; from: string; rcpts: string[] }) {
    return readSubmission(asBuffer(input.raw), input);
  },

  /** A contact import's CSV as rows to stage (records before `fromSeq` are counted, not returned). */
  async parseCsv(input: { csv: string; fromSeq: number }) {
    return parseCsvRows(input.csv, input.fromSeq);
  },
};

export type Tasks = typeof tasks;
export type TaskName = keyof Tasks;
export type TaskInput<K extends TaskName> = Parameters<Tasks[K]>[0];
export type TaskOutput<K extends TaskName> = Awaited<ReturnType<Tasks[K]>>;
