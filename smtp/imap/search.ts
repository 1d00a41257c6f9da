import { headerValue, parseMime, type MimeNode } from './mime.js';
import { str, type Token } from './parser.js';
import { inSet, parseSequenceSet } from './sequence.js';
import { bad } from './session.js';

/** One message as SEARCH sees it; `raw` only when a key needs the content. */
export type SearchRow = { uid: number; seq: number; flags: string[]; internalDate: number; size: number; raw?: Buffer };
type Ctx = { maxSeq: number; maxUid: number };
export type Predicate = { test: (r: SearchRow, ctx: Ctx, tree: () => MimeNode) => boolean; needsRaw: boolean };

const MONTHS = ['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'];
/** `1-Feb-1994` → UTC midnight ms. */
function parseDate(text: string): number {
  const m = /^(\d{1,2})-([A-Za-z]{3})-(\d{4})$/.exec(text);
  const month = m ? MONTHS.indexOf(m[2]!.toLowerCase()) : -1;
  if (!m || month < 0) throw bad(`Invalid date ${text.slice(0, 30)}; use 1-Feb-2024`);
  return Date.UTC(Number(m[3]), month, Number(m[1]));
}
const day = (ms: number) => Math.floor(ms / 86_400_000) * 86_400_000;

/** RFC 2047 encoded words, decoded well enough to search in. */
export function decodeWords(value: string): string {
  return value.replace(/=\?([^?]+)\?([bqBQ])\?([^?]*)\?=/g, (_m, charset: string, enc: string, text: string) => {
    try {
      const bytes = enc.toUpperCase() === 'B' ? Buffer.from(text, 'base64')
        : Buffer.from(text.replace(/_/g, ' ').replace(/=([0-9A-Fa-f]{2})/g, (_x, h: string) => String.fromCharCode(parseInt(h, 16))), 'binary');
      return new TextDecoder(charset.replace(/\*.*$/, '')).decode(bytes);
    } catch {
      return text;
    }
  });
}
const contains = (hay: string | undefined, needle: string) => (hay ? decodeWords(Buffer.from(hay, 'binary').toString('utf8')).toLowerCase().includes(needle.toLowerCase()) : false);

const flag = (f: string, has: boolean): Predicate => ({ test: (r) => r.flags.includes(f) === has, needsRaw: false });
const header = (name: string, needle: string): Predicate => ({
  test: (_r, _c, tree) => (needle === '' ? headerValue(tree(), name) !== undefined : tree().headers.some((h) => h.key === name && contains(h.value, needle))),
  needsRaw: true,
});
const sentDate = (tree: () => MimeNode) => {
  const v = headerValue(tree(), 'date');
  const t = v ? Date.parse(v) : NaN;
  return Number.isNaN(t) ? undefined : day(t);
};

/** Parses search keys (all of them must hold) from `tokens`, consuming what it reads. */
export function parseSearch(tokens: Token[]): Predicate {
  const keys: Predicate[] = [];
  while (tokens.length) keys.push(parseKey(tokens));
  return and(keys);
}
const and = (keys: Predicate[]): Predicate => ({ test: (r, c, t) => keys.every((k) => k.test(r, c, t)), needsRaw: keys.some((k) => k.needsRaw) });

function parseKey(tokens: Token[]): Predicate {
  const t = tokens.shift()!;
  if (t.type === 'list') return and(t.items.length ? [parseSearch([...t.items])] : []);
  const arg = (what: string) => str(tokens.shift(), what);
  const key = str(t).toUpperCase();
  switch (key) {
    case 'ALL': return { test: () => true, needsRaw: false };
    case 'SEEN': return flag('\\Seen', true);
    case 'UNSEEN': return flag('\\Seen', false);
    case 'FLAGGED': return flag('\\Flagged', true);
    case 'UNFLAGGED': return flag('\\Flagged', false);
    case 'ANSWERED': return flag('\\Answered', true);
    case 'UNANSWERED': return flag('\\Answered', false);
    case 'DELETED': return flag('\\Deleted', true);
    case 'UNDELETED': return flag('\\Deleted', false);
    case 'DRAFT': return flag('\\Draft', true);
    case 'UNDRAFT': return flag('\\Draft', false);
    case 'RECENT': case 'NEW': return { test: () => false, needsRaw: false };
    case 'OLD': return { test: () => true, needsRaw: false };
    case 'KEYWORD': return flag(arg('keyword'), true);
    case 'UNKEYWORD': return flag(arg('keyword'), false);
    case 'FROM': case 'TO': case 'CC': case 'BCC': case 'SUBJECT': return header(key.toLowerCase(), arg('search text'));
    case 'HEADER': { const name = arg('header name').toLowerCase(); return header(name, arg('search text')); }
    case 'BODY': { const s = arg('search text'); return { test: (_r, _c, tree) => contains(tree().body.toString('binary'), s), needsRaw: true }; }
    case 'TEXT': { const s = arg('search text'); return { test: (r) => contains(r.raw?.toString('binary'), s), needsRaw: true }; }
    case 'SINCE': { const d = parseDate(arg('date')); return { test: (r) => day(r.internalDate) >= d, needsRaw: false }; }
    case 'BEFORE': { const d = parseDate(arg('date')); return { test: (r) => day(r.internalDate) < d, needsRaw: false }; }
    case 'ON': { const d = parseDate(arg('date')); return { test: (r) => day(r.internalDate) === d, needsRaw: false }; }
    case 'SENTSINCE': { const d = parseDate(arg('date')); return { test: (_r, _c, tree) => (sentDate(tree) ?? -Infinity) >= d, needsRaw: true }; }
    case 'SENTBEFORE': { const d = parseDate(arg('date')); return { test: (_r, _c, tree) => (sentDate(tree) ?? Infinity) < d, needsRaw: true }; }
    case 'SENTON': { const d = parseDate(arg('date')); return { test: (_r, _c, tree) => sentDate(tree) === d, needsRaw: true }; }
    case 'LARGER': { const n = Number(arg('size')); return { test: (r) => r.size > n, needsRaw: false }; }
    case 'SMALLER': { const n = Number(arg('size')); return { test: (r) => r.size < n, needsRaw: false }; }
    case 'UID': {
      const set = parseSequenceSet(arg('UID set'));
      if (!set) throw bad('Invalid UID set');
      return { test: (r, c) => inSet(set, r.uid, c.maxUid), needsRaw: false };
    }
    case 'NOT': { const k = parseKey(tokens); return { test: (r, c, tr) => !k.test(r, c, tr), needsRaw: k.needsRaw }; }
    case 'OR': {
      if (tokens.length < 2) throw bad('OR needs two search keys');
      const a = parseKey(tokens);
      if (!tokens.length) throw bad('OR needs two search keys');
      const b = parseKey(tokens);
      return { test: (r, c, tr) => a.test(r, c, tr) || b.test(r, c, tr), needsRaw: a.needsRaw || b.needsRaw };
    }
    default: {
      const set = parseSequenceSet(key);
      if (!set) throw bad(`Unknown search key ${key.slice(0, 40)}`);
      return { test: (r, c) => inSet(set, r.seq, c.maxSeq), needsRaw: false };
    }
  }
}

/** Evaluates a parsed search against one row (parsing its MIME tree only if a key asks). */
export function matches(p: Predicate, row: SearchRow, ctx: Ctx): boolean {
  let tree: MimeNode | undefined;
  return p.test(row, ctx, () => (tree ??= parseMime(row.raw ?? Buffer.alloc(0))));
}
