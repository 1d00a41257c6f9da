/**
 * Asynchronous bounce and complaint reports: delivery status notifications (RFC 3464) and abuse feedback
 * reports (RFC 5965) that arrive at a return-path address. Pure parsing, no database.
 *
 * mailparser folds `message/delivery-status` into the body text and does not expose the report parts,
 * so the MIME tree is split here by a small parser that keeps only what reports need.
 */

export type BounceRecipient = {
  address: string;
  action: string;
  status: string | null;
  diagnostic: string | null;
  type: 'hard' | 'soft';
};
export type ParsedReport =
  | { kind: 'bounce'; messageId: string | null; recipients: BounceRecipient[] }
  | {
      kind: 'complaint';
      messageId: string | null;
      recipient: string | null;
      feedbackType: string;
      userAgent: string | null;
    };

type Fields = Map<string, string[]>;
/**
 * A leaf of the MIME tree, one char per byte (latin1); `body` is still in its transfer encoding: only the
 * parts a report decision reads are decoded (`decoded`), and only their first MAX_PART characters.
 */
type Leaf = { type: string; body: string; encoding: string | undefined };

const MAX_DEPTH = 8;
/** How much of a message a report is read from: the report parts come before the returned message (RFC 3464, 5965). */
const MAX_REPORT = 1024 * 1024;
/** How much of one report part (status fields, returned headers) is decoded. */
const MAX_PART = 256 * 1024;
/** Longest header value kept (a longer one is cut) and most parameters read: bounds the work per field. */
const MAX_FIELD = 8192;
const MAX_PARAMS = 32;
/** RFC 2046: a boundary is at most 70 characters. */
const MAX_BOUNDARY = 70;
const ID = 'msg_[A-Za-z0-9_-]{24}';
const VERP = new RegExp(`^bounce\\+(${ID})@`, 'i');
const DSN_TYPES = new Set(['message/delivery-status', 'message/global-delivery-status']);
const ARF_TYPES = new Set(['message/feedback-report']);
const ORIGINAL_TYPES = new Set(['text/rfc822-headers', 'message/rfc822', 'message/global', 'message/global-headers']);

/**
 * Parses a DSN or ARF report and finds the `msg_` id it is about (VERP envelope recipient first, then the
 * returned original headers); null when the message is neither kind of report.
 */
export async function parseReport(
  raw: Buffer,
  opts: { envelopeTo: string[]; serviceDomain: string },
): Promise<ParsedReport | null> {
  const text = raw.toString('latin1', 0, Math.min(raw.length, MAX_REPORT));
  // The cheap check first: a report is a multipart/report at the top; anything else is not read further.
  if (topLevelType(text) !== 'multipart/report') return null;
  const found = collect(text);
  if (!found.isReport) return null;
  const dsn = found.leaves.find((l) => DSN_TYPES.has(l.type));
  const arf = dsn ? undefined : found.leaves.find((l) => ARF_TYPES.has(l.type));
  if (!dsn && !arf) return null;
  const original = found.leaves.find((l) => ORIGINAL_TYPES.has(l.type));
  const originalHeaders = original ? parseFields(splitHead(decoded(original)).head) : new Map<string, string[]>();
  if (dsn) {
    const messageId = findMessageId(opts, originalHeaders, []);
    return { kind: 'bounce', messageId, recipients: parseDeliveryStatus(decoded(dsn)) };
  }
  const fields = parseFields(decoded(arf!));
  const rcpt = stripType(first(fields, 'original-rcpt-to') ?? first(originalHeaders, 'to') ?? '');
  return {
    kind: 'complaint',
    messageId: findMessageId(opts, originalHeaders, fields.get('original-mail-from') ?? []),
    recipient: addressOf(rcpt),
    feedbackType: (first(fields, 'feedback-type') ?? 'other').toLowerCase(),
    userAgent: first(fields, 'user-agent') ?? null,
  };
}

/**
 * The `msg_` id a report is about. The VERP envelope is ours and the most reliable; the returned
 * Message-ID needs our service domain so that a foreign `msg_…` id never matches; the original envelope
 * sender (ARF Original-Mail-From, a Return-Path kept in the returned headers) is a last resort.
 */
function findMessageId(
  opts: { envelopeTo: string[]; serviceDomain: string },
  original: Fields,
  mailFrom: string[],
): string | null {
  // Ids are case-sensitive, so the VERP local part is matched before any lower-casing.
  const verp = (addrs: string[]) => addrs.map((a) => VERP.exec(bareAddress(a) ?? '')?.[1]).find(Boolean) ?? null;
  const fromEnvelope = verp(opts.envelopeTo);
  if (fromEnvelope) return fromEnvelope;
  const domain = opts.serviceDomain.toLowerCase();
  for (const value of original.get('message-id') ?? []) {
    const m = new RegExp(`<(${ID})@([^<>\\s]+)>`).exec(value); // `<` excluded: a scan never runs past the next id
    if (m && m[2]!.toLowerCase() === domain) return m[1]!;
  }
  return verp([...mailFrom, ...(original.get('return-path') ?? [])]);
}

/** The per-recipient groups of a `message/delivery-status` body; failed and delayed recipients only. */
function parseDeliveryStatus(body: string): BounceRecipient[] {
  const out: BounceRecipient[] = [];
  // Groups are separated by blank lines; the first (per-message) one has no recipient and is skipped.
  for (const group of body.split(/\r?\n(?:[ \t]*\r?\n)+/)) {
    const f = parseFields(group);
    const address =
      addressOf(stripType(first(f, 'original-recipient') ?? '')) ??
      addressOf(stripType(first(f, 'final-recipient') ?? ''));
    const action = (first(f, 'action') ?? '').toLowerCase().split(/[\s(]/)[0]!;
    if (!address || (action !== 'failed' && action !== 'delayed')) continue;
    const status = /\b([245])\.\d{1,3}\.\d{1,3}\b/.exec(first(f, 'status') ?? '')?.[0] ?? null;
    const diagnostic = first(f, 'diagnostic-code');
    // A "failed" action is permanent unless the status class says the failure was transient.
    const type = action === 'failed' && !status?.startsWith('4') ? 'hard' : 'soft';
    out.push({ address, action, status, diagnostic: diagnostic ? stripType(diagnostic) : null, type });
  }
  return out;
}

/** Walks the MIME tree: whether it holds a multipart/report, and its leaf parts (not inside returned messages). */
function collect(raw: string): { isReport: boolean; leaves: Leaf[] } {
  const result = { isReport: false, leaves: [] as Leaf[] };
  const visit = (entity: string, depth: number) => {
    const { head, body } = splitHead(entity);
    const headers = parseFields(head);
    const ct = parseContentType(first(headers, 'content-type') ?? 'text/plain');
    if (
      ct.type.startsWith('multipart/') &&
      ct.params.boundary &&
      ct.params.boundary.length <= MAX_BOUNDARY &&
      depth < MAX_DEPTH
    ) {
      if (ct.type === 'multipart/report') result.isReport = true;
      for (const part of splitMultipart(body, ct.params.boundary)) visit(part, depth + 1);
      return;
    }
    result.leaves.push({ type: ct.type, body, encoding: first(headers, 'content-transfer-encoding') });
  };
  visit(raw, 0);
  return result;
}

/** The media type of the top-level entity, from its header block alone. */
function topLevelType(raw: string): string {
  return parseContentType(first(parseFields(splitHead(raw).head), 'content-type') ?? 'text/plain').type;
}

/** A leaf's body undone from its transfer encoding, at most MAX_PART characters of it read. */
const decoded = (leaf: Leaf): string =>
  decodeBody(leaf.body.length > MAX_PART ? leaf.body.slice(0, MAX_PART) : leaf.body, leaf.encoding);

/** Header block and body of an entity; an entity that starts with a blank line has no headers. */
function splitHead(entity: string): { head: string; body: string } {
  const m = /\r?\n\r?\n/.exec(entity);
  if (/^\r?\n/.test(entity)) return { head: '', body: entity.replace(/^\r?\n/, '') };
  if (!m) return { head: entity, body: '' };
  return { head: entity.slice(0, m.index), body: entity.slice(m.index + m[0].length) };
}

/** `Name: value` lines, unfolded (RFC 5322 2.2.3), keyed by lower-case name; values UTF-8 decoded. */
function parseFields(block: string): Fields {
  const fields: Fields = new Map();
  for (const line of block.replace(/\r?\n(?=[ \t])/g, '').split(/\r?\n/)) {
    const colon = line.indexOf(':');
    if (colon <= 0) continue;
    const name = line.slice(0, colon).trim().toLowerCase();
    if (colon > 200) continue; // not a header name
    const value = Buffer.from(line.slice(colon + 1, colon + 1 + MAX_FIELD), 'latin1')
      .toString('utf8')
      .replace(/\s+/g, ' ')
      .trim();
    // Appended in place: copying the list for each repeat was quadratic in the number of same-named fields.
    const values = fields.get(name);
    if (values) values.push(value);
    else fields.set(name, [value]);
  }
  return fields;
}

const first = (fields: Fields, name: string): string | undefined => fields.get(name)?.[0];

/**
 * `type/subtype; a=b; c="d"` with the type and parameter names lower-cased. A hand-written scanner:
 * one pass over at most MAX_FIELD characters, at most MAX_PARAMS parameters, whatever the input.
 */
export function parseContentType(value: string): { type: string; params: Record<string, string> } {
  const v = value.length > MAX_FIELD ? value.slice(0, MAX_FIELD) : value;
  const semi = v.indexOf(';');
  const type = (semi < 0 ? v : v.slice(0, semi)).trim().toLowerCase();
  const params: Record<string, string> = Object.create(null);
  let i = semi < 0 ? v.length : semi + 1;
  for (let count = 0; i < v.length && count < MAX_PARAMS; count++) {
    while (i < v.length && (v[i] === ' ' || v[i] === '\t' || v[i] === ';')) i++;
    const nameStart = i;
    while (i < v.length && v[i] !== '=' && v[i] !== ';') i++;
    const name = v.slice(nameStart, i).trim().toLowerCase();
    if (v[i] !== '=') continue; // a parameter without a value: skipped
    i++;
    while (i < v.length && (v[i] === ' ' || v[i] === '\t')) i++;
    let val = '';
    if (v[i] === '"') {
      for (i++; i < v.length && v[i] !== '"'; i++) val += v[i] === '\\' && i + 1 < v.length ? v[++i] : v[i];
      i++;
    } else {
      const start = i;
      while (i < v.length && v[i] !== ';' && v[i] !== ' ' && v[i] !== '\t') i++;
      val = v.slice(start, i);
    }
    if (name && !/[\s=]/.test(name) && !(name in params)) params[name] = val;
  }
  return { type, params };
}

/** The body parts between `--boundary` delimiter lines, up to the closing `--boundary--`. */
function splitMultipart(body: string, boundary: string): string[] {
  const escaped = boundary.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  // The line break before a delimiter belongs to it; the one after is skipped, not consumed by the match,
  // so that an empty part (two delimiters in a row) is still found.
  const delimiter = new RegExp(`(?:^|\\r?\\n)--${escaped}(--)?[ \\t]*(?=\\r?\\n|$)`, 'g');
  const parts: string[] = [];
  let start = -1;
  for (let m = delimiter.exec(body); m; m = delimiter.exec(body)) {
    if (start >= 0) parts.push(body.slice(start, m.index));
    if (m[1]) return parts;
    start = m.index + m[0].length;
    start += /^\r?\n/.exec(body.slice(start, start + 2))?.[0].length ?? 0;
  }
  // No closing delimiter (a truncated report): keep what follows the last one.
  if (start >= 0) parts.push(body.slice(start));
  return parts;
}

/** Undoes base64 and quoted-printable; 7bit, 8bit and binary bodies are kept as they are. */
function decodeBody(body: string, encoding: string | undefined): string {
  const cte = (encoding ?? '').toLowerCase();
  if (cte === 'base64') return Buffer.from(body.replace(/[^A-Za-z0-9+/=]/g, ''), 'base64').toString('latin1');
  if (cte === 'quoted-printable') {
    return withoutTrailingBlanks(body)
      .replace(/=\r?\n/g, '')
      .replace(/=([0-9A-Fa-f]{2})/g, (_, h: string) => String.fromCharCode(parseInt(h, 16)));
  }
  return body;
}

/**
 * Drops the spaces and tabs that end a line (quoted-printable transport padding), in one pass.
 * `/[ \t]+(?=\r?\n)/g` did the same in time quadratic in the length of a blank run that no line break ends.
 */
export function withoutTrailingBlanks(s: string): string {
  const kept: string[] = [];
  let from = 0;
  for (let i = 0; i < s.length;) {
    if (!isBlank(s.charCodeAt(i))) {
      i++;
      continue;
    }
    let end = i + 1;
    while (end < s.length && isBlank(s.charCodeAt(end))) end++;
    if (s[end] === '\n' || (s[end] === '\r' && s[end + 1] === '\n')) {
      kept.push(s.slice(from, i));
      from = end;
    }
    i = end;
  }
  kept.push(s.slice(from));
  return kept.join('');
}

const isBlank = (c: number) => c === 0x20 || c === 0x09;

/** Drops the `type;` prefix of DSN address and diagnostic fields (`rfc822; a@b`, `smtp; 550 …`). */
function stripType(value: string): string {
  const m = /^[A-Za-z0-9-]+\s*;\s*/.exec(value);
  return m ? value.slice(m[0].length).trim() : value.trim();
}

/** The bare address in `Name <a@b>`, `<a@b>` or `a@b`, case kept; null when there is none. */
function bareAddress(value: string): string | null {
  const candidate = (/<([^<>]*)>/.exec(value)?.[1] ?? value.split(/[\s,]+/).find((t) => t.includes('@')) ?? '').trim();
  return candidate.includes('@') ? candidate : null;
}

/** The bare address, lower-cased as suppressions and events keep it. */
const addressOf = (value: string): string | null => bareAddress(value)?.toLowerCase() ?? null;
