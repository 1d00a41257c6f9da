/**
 * A MIME tree over the raw bytes of a message, with byte-exact header and body of every part, for
 * IMAP sections (BODY[1.2], BODY[2.MIME], BODY[HEADER.FIELDS …]) and BODYSTRUCTURE.
 */
export type HeaderLine = { key: string; raw: string; value: string };
export type MimeNode = {
  header: Buffer;
  body: Buffer;
  headers: HeaderLine[];
  type: string;
  subtype: string;
  params: [string, string][];
  children: MimeNode[];
  embedded?: MimeNode;
};

const MAX_DEPTH = 20;
const MAX_PARTS = 500;

/** Splits header block and body at the first empty line. */
function splitHead(raw: Buffer): { header: Buffer; body: Buffer } {
  if (raw.length >= 2 && raw[0] === 0x0d && raw[1] === 0x0a)
    return { header: raw.subarray(0, 2), body: raw.subarray(2) };
  if (raw[0] === 0x0a) return { header: raw.subarray(0, 1), body: raw.subarray(1) };
  const crlf = raw.indexOf('\r\n\r\n');
  const lf = raw.indexOf('\n\n');
  if (crlf >= 0 && (lf < 0 || crlf < lf)) return { header: raw.subarray(0, crlf + 4), body: raw.subarray(crlf + 4) };
  if (lf >= 0) return { header: raw.subarray(0, lf + 2), body: raw.subarray(lf + 2) };
  return { header: raw, body: Buffer.alloc(0) };
}

/** Header lines of a part, unfolded for reading and kept folded (`raw`) for HEADER.FIELDS. */
export function parseHeaders(header: Buffer): HeaderLine[] {
  const out: HeaderLine[] = [];
  const lines = header.toString('binary').split(/\r?\n/);
  for (const line of lines) {
    if (line === '') continue;
    if (/^[ \t]/.test(line) && out.length) {
      const last = out.at(-1)!;
      last.raw += `\r\n${line}`;
      last.value += ` ${line.trim()}`;
      continue;
    }
    const colon = line.indexOf(':');
    if (colon <= 0) continue;
    out.push({ key: line.slice(0, colon).trim().toLowerCase(), raw: line, value: line.slice(colon + 1).trim() });
  }
  return out;
}

/** `type/subtype; a=b; c="d e"` → parts; parameter names lowercased. */
export function parseParams(value: string): { main: string; params: [string, string][] } {
  const params: [string, string][] = [];
  let i = value.indexOf(';');
  const main = (i < 0 ? value : value.slice(0, i)).trim();
  while (i >= 0 && i < value.length) {
    i++;
    const eq = value.indexOf('=', i);
    if (eq < 0) break;
    const name = value.slice(i, eq).trim().toLowerCase();
    let j = eq + 1;
    while (value[j] === ' ') j++;
    let v = '';
    if (value[j] === '"') {
      j++;
      while (j < value.length && value[j] !== '"') {
        if (value[j] === '\\') j++;
        v += value[j] ?? '';
        j++;
      }
      j = value.indexOf(';', j);
    } else {
      const end = value.indexOf(';', j);
      v = (end < 0 ? value.slice(j) : value.slice(j, end)).trim();
      j = end;
    }
    if (name) params.push([name, v]);
    i = j;
  }
  return { main, params };
}

/** The first value of a header (lowercase name), unfolded. */
export const headerValue = (node: { headers: HeaderLine[] }, key: string) =>
  node.headers.find((h) => h.key === key)?.value;

/** Parses raw message bytes into a MIME tree (bounded depth and part count). */
export function parseMime(raw: Buffer, depth = 0, counter = { parts: 0 }, embed = false): MimeNode {
  const { header, body } = splitHead(raw);
  const headers = parseHeaders(header);
  const ct = parseParams(headerValue({ headers }, 'content-type') ?? 'text/plain; charset=us-ascii');
  const [type = 'text', subtype = 'plain'] = ct.main.toLowerCase().split('/');
  const node: MimeNode = { header, body, headers, type, subtype, params: ct.params, children: [] };
  if (depth >= MAX_DEPTH || ++counter.parts > MAX_PARTS) return node;
  const boundary = ct.params.find(([k]) => k === 'boundary')?.[1];
  if (type === 'multipart' && boundary)
    node.children = splitMultipart(body, boundary).map((p) => parseMime(p, depth + 1, counter, true));
  else if (embed && type === 'message' && subtype === 'rfc822')
    node.embedded = parseMime(body, depth + 1, counter, false);
  return node;
}

function splitMultipart(body: Buffer, boundary: string): Buffer[] {
  const delim = Buffer.from(`--${boundary}`);
  const parts: Buffer[] = [];
  let start = -1;
  let pos = 0;
  while (pos <= body.length) {
    const at = body.indexOf(delim, pos);
    if (at < 0) break;
    const lineStart = at === 0 || body[at - 1] === 0x0a;
    if (!lineStart) {
      pos = at + delim.length;
      continue;
    }
    if (start >= 0) {
      let end = at;
      if (body[end - 1] === 0x0a) end--;
      if (body[end - 1] === 0x0d) end--;
      parts.push(body.subarray(start, Math.max(start, end)));
    }
    const closing = body[at + delim.length] === 0x2d && body[at + delim.length + 1] === 0x2d;
    const eol = body.indexOf(0x0a, at);
    if (closing || eol < 0) return parts;
    start = eol + 1;
    pos = start;
  }
  if (start >= 0 && start < body.length) parts.push(body.subarray(start));
  return parts;
}
