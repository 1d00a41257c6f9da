import { headerValue, parseMime, type MimeNode } from './mime.js';
import { str, type Token } from './parser.js';
import { compileSet, parseSequenceSet, type SeqRange } from './sequence.js';
import { bad, no } from './session.js';

/** One message as SEARCH sees it; `raw` only when a key needs the content. */
export type SearchRow = { uid: number; seq: number; flags: string[]; internalDate: number; size: number; raw?: Buffer };
type Ctx = { maxSeq: number; maxUid: number };
/**
 * One message's content as the keys read it, each piece decoded at most once per command (however many
 * keys read it), every read charged to the command's work budget first.
 */
export type Content = {
  tree(): MimeNode;
  text(): string;
  body(): string;
  header(name: string): string[];
  charge(units: number): void;
};
export type Predicate = { test: (r: SearchRow, ctx: Ctx, m: Content) => boolean; needsRaw: boolean };

/** A command's budget of work units (bytes decoded or scanned, plus a constant per key and message); NO [LIMIT] when spent. */
export class WorkBudget {
  constructor(
    private left: number,
    private readonly what: string,
  ) {}
  charge(units: number): void {
    this.left -= units;
    if (this.left < 0) throw no(`${this.what} needs more work than one command may do; narrow it down`, 'LIMIT');
  }
}
/** What each key costs per message before any scanning: thousands of cheap keys still add up. */
const KEY_COST = 1024;

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
      const bytes =
        enc.toUpperCase() === 'B'
          ? Buffer.from(text, 'base64')
          : Buffer.from(
              text
                .replace(/_/g, ' ')
                .replace(/=([0-9A-Fa-f]{2})/g, (_x, h: string) => String.fromCharCode(parseInt(h, 16))),
              'binary',
            );
      return new TextDecoder(charset.split('*', 1)[0]).decode(bytes); // RFC 2231 `charset*lang`: the language is dropped
    } catch {
      return text;
    }
  });
}
/** Text as SEARCH compares it: encoded words decoded, lower case. */
const searchable = (binary: string) => decodeWords(Buffer.from(binary, 'binary').toString('utf8')).toLowerCase();
/** Scans `hay` for `needle` (already lower case), charging its length first. */
const scan = (m: Content, hay: string, needle: string) => {
  m.charge(hay.length);
  return hay.includes(needle);
};

const flag = (f: string, has: boolean): Predicate => ({ test: (r) => r.flags.includes(f) === has, needsRaw: false });
const header = (name: string, text: string): Predicate => {
  const needle = text.toLowerCase();
  return {
    test: (_r, _c, m) =>
      needle === '' ? headerValue(m.tree(), name) !== undefined : m.header(name).some((v) => scan(m, v, needle)),
    needsRaw: true,
  };
};
const sentDate = (m: Content) => {
  const v = headerValue(m.tree(), 'date');
  const t = v ? Date.parse(v) : NaN;
  return Number.isNaN(t) ? undefined : day(t);
};

/** Parses search keys (all of them must hold) from `tokens`, consuming what it reads. */
export function parseSearch(tokens: Token[]): Predicate {
  const keys: Predicate[] = [];
  while (tokens.length) keys.push(parseKey(tokens));
  return and(keys);
}
const and = (keys: Predicate[]): Predicate => ({
  test: (r, c, t) => keys.every((k) => k.test(r, c, t)),
  needsRaw: keys.some((k) => k.needsRaw),
});

function parseKey(tokens: Token[]): Predicate {
  const t = tokens.shift()!;
  if (t.type === 'list') return and(t.items.length ? [parseSearch([...t.items])] : []);
  const arg = (what: string) => str(tokens.shift(), what);
  const key = str(t).toUpperCase();
  switch (key) {
    case 'ALL':
      return { test: () => true, needsRaw: false };
    case 'SEEN':
      return flag('\\Seen', true);
    case 'UNSEEN':
      return flag('\\Seen', false);
    case 'FLAGGED':
      return flag('\\Flagged', true);
    case 'UNFLAGGED':
      return flag('\\Flagged', false);
    case 'ANSWERED':
      return flag('\\Answered', true);
    case 'UNANSWERED':
      return flag('\\Answered', false);
    case 'DELETED':
      return flag('\\Deleted', true);
    case 'UNDELETED':
      return flag('\\Deleted', false);
    case 'DRAFT':
      return flag('\\Draft', true);
    case 'UNDRAFT':
      return flag('\\Draft', false);
    case 'RECENT':
    case 'NEW':
      return { test: () => false, needsRaw: false };
    case 'OLD':
      return { test: () => true, needsRaw: false };
    case 'KEYWORD':
      return flag(arg('keyword'), true);
    case 'UNKEYWORD':
      return flag(arg('keyword'), false);
    case 'FROM':
    case 'TO':
    case 'CC':
    case 'BCC':
    case 'SUBJECT':
      return header(key.toLowerCase(), arg('search text'));
    case 'HEADER': {
      const name = arg('header name').toLowerCase();
      return header(name, arg('search text'));
    }
    case 'BODY': {
      const s = arg('search text').toLowerCase();
      return { test: (_r, _c, m) => scan(m, m.body(), s), needsRaw: true };
    }
    case 'TEXT': {
      const s = arg('search text').toLowerCase();
      return { test: (_r, _c, m) => scan(m, m.text(), s), needsRaw: true };
    }
    case 'SINCE': {
      const d = parseDate(arg('date'));
      return { test: (r) => day(r.internalDate) >= d, needsRaw: false };
    }
    case 'BEFORE': {
      const d = parseDate(arg('date'));
      return { test: (r) => day(r.internalDate) < d, needsRaw: false };
    }
    case 'ON': {
      const d = parseDate(arg('date'));
      return { test: (r) => day(r.internalDate) === d, needsRaw: false };
    }
    case 'SENTSINCE': {
      const d = parseDate(arg('date'));
      return { test: (_r, _c, m) => (sentDate(m) ?? -Infinity) >= d, needsRaw: true };
    }
    case 'SENTBEFORE': {
      const d = parseDate(arg('date'));
      return { test: (_r, _c, m) => (sentDate(m) ?? Infinity) < d, needsRaw: true };
    }
    case 'SENTON': {
      const d = parseDate(arg('date'));
      return { test: (_r, _c, m) => sentDate(m) === d, needsRaw: true };
    }
    case 'LARGER': {
      const n = Number(arg('size'));
      return { test: (r) => r.size > n, needsRaw: false };
    }
    case 'SMALLER': {
      const n = Number(arg('size'));
      return { test: (r) => r.size < n, needsRaw: false };
    }
    case 'UID': {
      const set = parseSequenceSet(arg('UID set'));
      if (!set) throw bad('Invalid UID set');
      const has = member(set, (c) => c.maxUid);
      return { test: (r, c) => has(r.uid, c), needsRaw: false };
    }
    case 'NOT': {
      const k = parseKey(tokens);
      return { test: (r, c, m) => !k.test(r, c, m), needsRaw: k.needsRaw };
    }
    case 'OR': {
      if (tokens.length < 2) throw bad('OR needs two search keys');
      const a = parseKey(tokens);
      if (!tokens.length) throw bad('OR needs two search keys');
      const b = parseKey(tokens);
      return { test: (r, c, m) => a.test(r, c, m) || b.test(r, c, m), needsRaw: a.needsRaw || b.needsRaw };
    }
    default: {
      const set = parseSequenceSet(key);
      if (!set) throw bad(`Unknown search key ${key.slice(0, 40)}`);
      const has = member(set, (c) => c.maxSeq);
      return { test: (r, c) => has(r.seq, c), needsRaw: false };
    }
  }
}

/** Membership in a sequence set, compiled once per command (`*` is fixed for the command). */
function member(set: SeqRange[], max: (c: Ctx) => number): (n: number, c: Ctx) => boolean {
  let compiled: ((n: number) => boolean) | undefined;
  let forCtx: Ctx | undefined;
  return (n, c) => {
    if (forCtx !== c) {
      compiled = compileSet(set, max(c));
      forCtx = c;
    }
    return compiled!(n);
  };
}

/** Counts the keys of a parsed search (each costs KEY_COST per message it is tested against). */
export function countKeys(tokens: Token[]): number {
  return tokens.reduce((n, t) => n + (t.type === 'list' ? countKeys(t.items) : 1), 0);
}

/**
 * Evaluates a parsed search against one row. Its MIME tree, decoded text, body and header values are
 * each made at most once for the row, whatever the number of keys; every key and every byte read is
 * charged to `budget` before the work is done.
 */
export function matches(p: Predicate, row: SearchRow, ctx: Ctx, budget: WorkBudget, keys: number): boolean {
  budget.charge(keys * KEY_COST);
  const raw = row.raw ?? Buffer.alloc(0);
  let tree: MimeNode | undefined;
  let text: string | undefined;
  let body: string | undefined;
  const headers = new Map<string, string[]>();
  const m: Content = {
    charge: (units) => budget.charge(units),
    tree: () => {
      if (!tree) {
        budget.charge(raw.length);
        tree = parseMime(raw);
      }
      return tree;
    },
    text: () => {
      if (text === undefined) {
        budget.charge(raw.length);
        text = searchable(raw.toString('binary'));
      }
      return text;
    },
    body: () => {
      if (body === undefined) {
        const b = m.tree().body;
        budget.charge(b.length);
        body = searchable(b.toString('binary'));
      }
      return body;
    },
    header: (name) => {
      let values = headers.get(name);
      if (!values) {
        values = m
          .tree()
          .headers.filter((h) => h.key === name)
          .map((h) => searchable(h.value));
        headers.set(name, values);
      }
      return values;
    },
  };
  return p.test(row, ctx, m);
}
