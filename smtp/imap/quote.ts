/** IMAP string output: a quoted string where safe, else a literal; NIL for null. */
export type Out = (string | Buffer)[];

export function istr(value: string | Buffer | null | undefined): string | Buffer {
  if (value === null || value === undefined) return 'NIL';
  const buf = Buffer.isBuffer(value) ? value : Buffer.from(value, 'utf8');
  // eslint-disable-next-line no-control-regex
  if (buf.length < 1000 && !/[\x00\r\n\x80-\xff]/.test(buf.toString('latin1')))
    return `"${buf.toString('latin1').replace(/[\\"]/g, (c) => `\\${c}`)}"`;
  return Buffer.concat([Buffer.from(`{${buf.length}}\r\n`), buf]);
}

/** Joins output pieces with spaces inside parentheses. */
export function ilist(items: (string | Buffer)[]): Buffer {
  const out: Buffer[] = [Buffer.from('(')];
  items.forEach((it, i) => {
    if (i) out.push(Buffer.from(' '));
    out.push(Buffer.isBuffer(it) ? it : Buffer.from(it, 'utf8'));
  });
  out.push(Buffer.from(')'));
  return Buffer.concat(out);
}

/** A parenthesized list, or NIL when empty. */
export const nilOrList = (items: (string | Buffer)[] | null) => (items && items.length ? ilist(items) : 'NIL');
