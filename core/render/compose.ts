import { badRequest } from '../errors.js';
import { fillMergeTags, mergeData, type MergeData } from './merge.js';

export type Content = { subject: string; html: string | null; text: string | null };

/** Header names a caller may not set: they would break the MIME structure or the envelope. */
const STRUCTURAL = new Set([
  'content-type',
  'content-transfer-encoding',
  'mime-version',
  'bcc',
  'content-length',
  'dkim-signature',
]);

/** Checks caller headers: RFC 5322 field names, no CR/LF in values (no header injection), no structural fields. */
export function checkHeaders(headers: Record<string, string> | undefined, field = 'headers'): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers ?? {})) {
    if (!/^[!-9;-~]+$/.test(name)) throw badRequest(`${field}: "${name}" is not a valid header name`, 'invalid_header');
    if (/[\r\n]/.test(value))
      throw badRequest(`${field}.${name}: header values cannot contain line breaks`, 'invalid_header');
    if (STRUCTURAL.has(name.toLowerCase()))
      throw badRequest(`${field}.${name}: this header is set by the service`, 'invalid_header');
    out[name] = value;
  }
  return out;
}

/**
 * Seeds subject/html/text from a template, lets explicit request fields override, then fills
 * merge tags from `templateData` (HTML-escaped in html). Subject and a body are required in the end.
 */
export function composeContent(
  explicit: { subject?: string; html?: string; text?: string },
  template: { subject: string | null; html: string | null; text: string | null } | undefined,
  data: MergeData | undefined,
): Content {
  const subject = explicit.subject ?? template?.subject ?? undefined;
  const html = explicit.html ?? template?.html ?? null;
  const text = explicit.text ?? template?.text ?? null;
  if (subject === undefined || subject === null || subject === '')
    throw badRequest('subject is required unless the template supplies one', 'subject_required');
  if (!html && !text) throw badRequest('Give html or text (or a templateId that has them)', 'content_required');
  const d = mergeData(data);
  return {
    subject: fillMergeTags(subject, d, { html: false }).replace(/[\r\n]+/g, ' '),
    html: html === null ? null : fillMergeTags(html, d, { html: true }),
    text: text === null ? null : fillMergeTags(text, d, { html: false }),
  };
}
