import { Gunzip, Inflate } from 'fflate';
import { simpleParser } from 'mailparser';
import { ReportRefusal } from './report-refusal.js';
import { readZipEntry } from './zip-entry.js';

/**
 * Finds an aggregate report (DMARC, RFC 7489 appendix C; TLS, RFC 8460) inside the mail that carries it and
 * unpacks it within its bounds: plain, gzip or zip. Pure, no database, no network (runs in the parse pool).
 * Content types lie, so the bytes decide: 1f 8b is gzip, `PK\x03\x04` zip, `<` XML, `{` JSON.
 */

export type ReportKind = 'dmarc' | 'tls';
type Magic = 'gzip' | 'zip' | 'xml' | 'json';

/** The content types and file names each kind of report is mailed with (any part is still sniffed). */
const TYPES: Record<ReportKind, Set<string>> = {
  dmarc: new Set([
    'application/gzip',
    'application/x-gzip',
    'application/zip',
    'application/x-zip-compressed',
    'text/xml',
    'application/xml',
  ]),
  tls: new Set(['application/tlsrpt+gzip', 'application/tlsrpt+json', 'application/gzip', 'application/json']),
};
const NAMES: Record<ReportKind, string[]> = {
  dmarc: ['.xml', '.xml.gz', '.gz', '.zip'],
  tls: ['.json', '.json.gz', '.gz'],
};
/** The document each kind is, once unpacked, and the zip entry name that holds it. */
const DOCUMENT: Record<ReportKind, { magic: Magic; ext: string }> = {
  dmarc: { magic: 'xml', ext: '.xml' },
  tls: { magic: 'json', ext: '.json' },
};

/** Input bytes handed to the inflater at once: deflate expands at most ~1032:1, so one push makes at most ~4 MB. */
const STEP = 4096;

export function sniff(bytes: Uint8Array): Magic | null {
  if (bytes[0] === 0x1f && bytes[1] === 0x8b) return 'gzip';
  if (bytes[0] === 0x50 && bytes[1] === 0x4b && bytes[2] === 0x03 && bytes[3] === 0x04) return 'zip';
  let i = bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf ? 3 : 0; // a UTF-8 byte order mark
  while (
    i < bytes.length &&
    i < 4096 &&
    (bytes[i] === 0x20 || bytes[i] === 0x09 || bytes[i] === 0x0a || bytes[i] === 0x0d)
  )
    i += 1;
  if (bytes[i] === 0x3c) return 'xml';
  if (bytes[i] === 0x7b) return 'json';
  return null;
}

/**
 * The report document of `kind` in a mail, as text no longer than `maxBytes` once decompressed. Throws a
 * ReportRefusal: `not_a_report`, `report_too_large`, `too_many_entries`, `bad_archive`.
 */
export async function reportDocument(raw: Buffer, kind: ReportKind, maxBytes: number): Promise<string> {
  const part = await findPart(raw, kind);
  const bytes = unpack(part.bytes, kind, maxBytes);
  if (sniff(bytes) !== DOCUMENT[kind].magic) throw new ReportRefusal('not_a_report');
  return new TextDecoder('utf-8').decode(bytes);
}

/** The attachment (or the body) that holds the report: among the parts whose bytes look like one, a listed type or name first. */
async function findPart(raw: Buffer, kind: ReportKind): Promise<{ bytes: Uint8Array }> {
  const mail = await simpleParser(raw, {
    skipHtmlToText: true,
    skipTextToHtml: true,
    skipImageLinks: true,
  }).catch(() => {
    throw new ReportRefusal('not_a_report');
  });
  const wanted = new Set<Magic>(['gzip', 'zip', DOCUMENT[kind].magic]);
  const found = mail.attachments
    .map((a) => ({ bytes: a.content as Uint8Array, magic: sniff(a.content), listed: listed(kind, a) }))
    .filter((a) => a.magic !== null && wanted.has(a.magic));
  const best = found.find((a) => a.listed) ?? found[0];
  if (best) return best;
  // A report sent as the whole body in a text type: mailparser puts it in `text`.
  const text = typeof mail.text === 'string' ? Buffer.from(mail.text) : undefined;
  if (text && sniff(text) === DOCUMENT[kind].magic) return { bytes: text };
  throw new ReportRefusal('not_a_report');
}

function listed(kind: ReportKind, a: { contentType: string; filename?: string }): boolean {
  const name = (a.filename ?? '').toLowerCase();
  return TYPES[kind].has(a.contentType.toLowerCase()) || NAMES[kind].some((ext) => name.endsWith(ext));
}

/** The document inside `bytes`: gunzipped, or the zip's report entry inflated, never past `maxBytes`. */
function unpack(bytes: Uint8Array, kind: ReportKind, maxBytes: number): Uint8Array {
  const magic = sniff(bytes);
  if (magic === 'gzip') return gunzip(bytes, maxBytes);
  if (magic === 'zip') return readZipEntry(bytes, DOCUMENT[kind].ext, maxBytes, inflateRaw);
  if (bytes.length > maxBytes) throw new ReportRefusal('report_too_large');
  return bytes;
}

/**
 * gzip (one member or several) inflated STEP input bytes at a time, refused as soon as the output passes
 * `maxBytes`. The size the trailer declares (ISIZE) is not read: it is mod 2^32, and a truncated stream's
 * last bytes are not a size at all.
 */
export function gunzip(bytes: Uint8Array, maxBytes: number): Uint8Array {
  return bounded(new Gunzip(), bytes, maxBytes);
}

/** A raw deflate stream (a zip entry), bounded the same way. */
export function inflateRaw(bytes: Uint8Array, maxBytes: number): Uint8Array {
  return bounded(new Inflate(), bytes, maxBytes);
}

function bounded(stream: Gunzip | Inflate, bytes: Uint8Array, maxBytes: number): Uint8Array {
  const chunks: Uint8Array[] = [];
  let total = 0;
  stream.ondata = (data: Uint8Array) => {
    total += data.length;
    if (total > maxBytes) throw new ReportRefusal('report_too_large');
    chunks.push(data);
  };
  try {
    for (let at = 0; at < bytes.length; at += STEP) {
      const end = Math.min(at + STEP, bytes.length);
      stream.push(bytes.subarray(at, end), end === bytes.length);
    }
    if (bytes.length === 0) throw new ReportRefusal('bad_archive');
  } catch (err) {
    if (err instanceof ReportRefusal) throw err;
    throw new ReportRefusal('bad_archive'); // fflate's own errors: truncated or corrupt data
  }
  const out = new Uint8Array(total);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}

/** Cuts a string to `max` characters (every value a report hands on is kept short). */
export const cut = (s: string, max = 255) => (s.length > max ? s.slice(0, max) : s);
