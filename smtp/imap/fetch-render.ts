import addressparser from 'nodemailer/lib/addressparser';
import { headerValue, parseParams, type MimeNode } from './mime.js';
import { ilist, istr, nilOrList } from './quote.js';

type Parsed = { name?: string; address?: string; group?: Parsed[] };
const hv = (node: MimeNode, key: string) => {
  const v = headerValue(node, key);
  return v === undefined ? null : Buffer.from(v, 'binary');
};

/** An address list header as IMAP address structures, `NIL` when absent. */
function addresses(node: MimeNode, key: string): string | Buffer {
  const value = headerValue(node, key);
  if (!value) return 'NIL';
  const out: (string | Buffer)[] = [];
  const one = (a: Parsed) => {
    const address = a.address ?? '';
    const at = address.lastIndexOf('@');
    const name = a.name ? Buffer.from(a.name, 'binary') : null;
    out.push(
      ilist([
        istr(name),
        'NIL',
        istr(at < 0 ? address : address.slice(0, at)),
        at < 0 ? 'NIL' : istr(address.slice(at + 1)),
      ]),
    );
  };
  for (const a of addressparser(value) as Parsed[]) {
    if (a.group) {
      out.push(ilist(['NIL', 'NIL', istr(a.name ?? ''), 'NIL']));
      a.group.forEach(one);
      out.push(ilist(['NIL', 'NIL', 'NIL', 'NIL']));
    } else one(a);
  }
  return nilOrList(out);
}

/** ENVELOPE (RFC 3501 §7.4.2): header values as sent; sender and reply-to default to from. */
export function envelope(node: MimeNode): Buffer {
  const from = addresses(node, 'from');
  const sender = headerValue(node, 'sender') ? addresses(node, 'sender') : from;
  const replyTo = headerValue(node, 'reply-to') ? addresses(node, 'reply-to') : from;
  return ilist([
    istr(hv(node, 'date')),
    istr(hv(node, 'subject')),
    from,
    sender,
    replyTo,
    addresses(node, 'to'),
    addresses(node, 'cc'),
    addresses(node, 'bcc'),
    istr(hv(node, 'in-reply-to')),
    istr(hv(node, 'message-id')),
  ]);
}

const paramList = (params: [string, string][]) =>
  nilOrList(params.flatMap(([k, v]) => [istr(k.toUpperCase()), istr(Buffer.from(v, 'binary'))]));
const lineCount = (b: Buffer) => {
  let n = 0;
  for (let i = b.indexOf(0x0a); i >= 0; i = b.indexOf(0x0a, i + 1)) n++;
  return n;
};
function disposition(node: MimeNode): string | Buffer {
  const v = headerValue(node, 'content-disposition');
  if (!v) return 'NIL';
  const d = parseParams(v);
  return ilist([istr(d.main.toUpperCase()), paramList(d.params)]);
}

/** BODYSTRUCTURE (with extension data) or BODY (without), RFC 3501 §7.4.2. */
export function bodyStructure(node: MimeNode, extended: boolean): Buffer {
  if (node.children.length) {
    const kids = Buffer.concat(node.children.map((c) => bodyStructure(c, extended)));
    const tail = [istr(node.subtype.toUpperCase())];
    if (extended)
      tail.push(
        paramList(node.params),
        disposition(node),
        istr(hv(node, 'content-language')),
        istr(hv(node, 'content-location')),
      );
    return Buffer.concat([Buffer.from('('), kids, Buffer.from(' '), ilist(tail).subarray(1)]);
  }
  const type = node.type === 'multipart' ? 'text' : node.type;
  const subtype = node.type === 'multipart' ? 'plain' : node.subtype;
  const items: (string | Buffer)[] = [
    istr(type.toUpperCase()),
    istr(subtype.toUpperCase()),
    paramList(node.params),
    istr(hv(node, 'content-id')),
    istr(hv(node, 'content-description')),
    istr((headerValue(node, 'content-transfer-encoding') ?? '7BIT').toUpperCase()),
    String(node.body.length),
  ];
  if (type === 'text') items.push(String(lineCount(node.body)));
  if (node.embedded)
    items.push(envelope(node.embedded), bodyStructure(node.embedded, extended), String(lineCount(node.body)));
  if (extended)
    items.push(
      istr(hv(node, 'content-md5')),
      disposition(node),
      istr(hv(node, 'content-language')),
      istr(hv(node, 'content-location')),
    );
  return ilist(items);
}

/** The node a part path (`1.2`) names, or undefined. */
function partAt(root: MimeNode, path: number[]): MimeNode | undefined {
  let node: MimeNode | undefined = root;
  for (const [i, n] of path.entries()) {
    if (!node) return undefined;
    if (i > 0 && node.embedded) node = node.embedded;
    if (node.children.length) node = node.children[n - 1];
    else if (n !== 1) return undefined;
  }
  return node;
}

function headerFields(node: MimeNode, names: string[], not: boolean): Buffer {
  const wanted = new Set(names.map((n) => n.toLowerCase()));
  const lines = node.headers.filter((h) => wanted.has(h.key) !== not).map((h) => `${h.raw}\r\n`);
  return Buffer.from(`${lines.join('')}\r\n`, 'binary');
}

const SECTION = /^((?:\d+\.)*\d+)?\.?(HEADER\.FIELDS\.NOT|HEADER\.FIELDS|HEADER|TEXT|MIME)?\s*(?:\((.*)\))?$/i;

/** Whether a section specifier is well formed (checked before any message is read). */
export const validSection = (section: string) => {
  const m = SECTION.exec(section.trim());
  if (!m) return false;
  const kind = m[2]?.toUpperCase();
  if (kind === 'MIME' && !m[1]) return false;
  return (m[3] !== undefined) === (kind === 'HEADER.FIELDS' || kind === 'HEADER.FIELDS.NOT');
};

/** The bytes of BODY[section] of a message, or an empty buffer when the part does not exist. */
export function sectionBytes(raw: Buffer, root: () => MimeNode, section: string): Buffer {
  const m = SECTION.exec(section.trim());
  if (!m) return Buffer.alloc(0);
  const path = m[1] ? m[1].split('.').map(Number) : [];
  const kind = m[2]?.toUpperCase();
  if (path.length === 0 && !kind) return raw;
  let node = path.length ? partAt(root(), path) : root();
  if (!node) return Buffer.alloc(0);
  if (kind === 'MIME') return node.header;
  if (!kind) return node.body;
  if (path.length) {
    if (!node.embedded) return Buffer.alloc(0);
    node = node.embedded;
  }
  if (kind === 'TEXT') return node.body;
  if (kind === 'HEADER') return node.header;
  const names = (m[3] ?? '')
    .trim()
    .split(/\s+/)
    .map((n) => n.replace(/^"|"$/g, ''))
    .filter(Boolean);
  return headerFields(node, names, kind === 'HEADER.FIELDS.NOT');
}
