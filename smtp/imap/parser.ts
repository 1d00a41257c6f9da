/**
 * The IMAP command grammar this server reads (RFC 3501 §9, the parts clients use): a tag, a command
 * name and arguments made of atoms, quoted strings, literals and parenthesized lists. Fetch attributes
 * such as `BODY.PEEK[HEADER.FIELDS (From To)]<0.100>` stay one atom, brackets and all.
 */
export type Token =
  { type: 'atom'; value: string } | { type: 'string'; value: Buffer } | { type: 'list'; items: Token[] };
export type Command = { tag: string; name: string; args: Token[] };

export class ParseError extends Error {
  constructor(
    message: string,
    readonly tag?: string,
  ) {
    super(message);
  }
}

// eslint-disable-next-line no-control-regex
const TAG = /^[^\s(){%*"\\+\]\x00-\x1f\x7f]+$/;
const ATOM_STOP = new Set([' ', '(', ')', '{', '"', '\r', '\n']);
const MAX_DEPTH = 20;
const MAX_TOKENS = 10_000;

/** Parses one framed command (line parts alternating with literals). */
export function parseCommand(parts: (string | Buffer)[]): Command {
  const first = parts[0];
  if (typeof first !== 'string') throw new ParseError('Missing command');
  const sp = first.indexOf(' ');
  const tag = sp > 0 ? first.slice(0, sp) : first;
  const validTag = sp > 0 && tag.length > 0 && tag.length <= 64 && TAG.test(tag);
  const m = sp > 0 ? /^([A-Za-z]{1,32})(?: |$)/.exec(first.slice(sp + 1)) : null;
  if (!validTag || !m) throw new ParseError('Expected: <tag> <command> [arguments]', validTag ? tag : undefined);
  try {
    return { tag, name: m[1]!.toUpperCase(), args: tokenize([first.slice(sp + 1 + m[0].length), ...parts.slice(1)]) };
  } catch (err) {
    throw new ParseError((err as Error).message, tag);
  }
}

/** Tokens of the argument text; a part ending in `{n}` is followed by the literal's bytes. */
export function tokenize(parts: (string | Buffer)[]): Token[] {
  const root: Token[] = [];
  const stack: Token[][] = [root];
  let count = 0;
  const push = (t: Token) => {
    if (++count > MAX_TOKENS) throw new Error('Too many arguments');
    stack.at(-1)!.push(t);
  };
  for (let p = 0; p < parts.length; p++) {
    const part = parts[p]!;
    if (typeof part !== 'string') throw new Error('Unexpected literal');
    let s = part;
    const lit = /\{(\d+)\+?\}$/.exec(s);
    if (lit && p + 1 < parts.length) s = s.slice(0, lit.index);
    let i = 0;
    while (i < s.length) {
      const c = s[i]!;
      if (c === ' ') {
        i++;
      } else if (c === '(') {
        if (stack.length > MAX_DEPTH) throw new Error('Lists nested too deeply');
        const list: Token = { type: 'list', items: [] };
        push(list);
        stack.push(list.items);
        i++;
      } else if (c === ')') {
        if (stack.length === 1) throw new Error('Unbalanced )');
        stack.pop();
        i++;
      } else if (c === '"') {
        let out = '';
        i++;
        for (;;) {
          if (i >= s.length) throw new Error('Unterminated quoted string');
          const d = s[i]!;
          if (d === '\\') {
            const e = s[i + 1];
            if (e !== '\\' && e !== '"') throw new Error('Bad escape in quoted string');
            out += e;
            i += 2;
          } else if (d === '"') {
            i++;
            break;
          } else {
            out += d;
            i++;
          }
        }
        push({ type: 'string', value: Buffer.from(out, 'utf8') });
      } else if (c === '{') {
        throw new Error('Literal must end the line');
      } else {
        let j = i;
        let depth = 0;
        while (j < s.length) {
          const d = s[j]!;
          if (d === '[') depth++;
          else if (d === ']') depth = Math.max(0, depth - 1);
          else if (depth === 0 && (ATOM_STOP.has(d) || d === ')')) break;
          else if (d.charCodeAt(0) < 0x20) throw new Error('Control character in atom');
          j++;
        }
        if (depth > 0) throw new Error('Unbalanced [');
        if (j === i) throw new Error(`Unexpected character ${JSON.stringify(c)}`);
        push({ type: 'atom', value: s.slice(i, j) });
        i = j;
      }
    }
    if (lit && p + 1 < parts.length) {
      const bytes = parts[++p];
      if (!Buffer.isBuffer(bytes)) throw new Error('Literal expected');
      push({ type: 'string', value: bytes });
    }
  }
  if (stack.length !== 1) throw new Error('Unbalanced (');
  return root;
}

/** A string argument (atom, quoted or literal) as text; throws on a list. */
export function str(t: Token | undefined, what = 'argument'): string {
  if (!t || t.type === 'list') throw new ParseError(`Expected ${what}`);
  return t.type === 'atom' ? t.value : t.value.toString('utf8');
}
