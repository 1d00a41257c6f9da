import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parse } from 'smol-toml';

import { BOUNCE_CLASSES, type BounceClass } from './bounce-classes.js';

export { BOUNCE_CLASSES, type BounceClass };

/** Recipient-level hard classes: a permanent failure of one of these suppresses the address. Nothing else ever does. */
const SUPPRESSING: ReadonlySet<BounceClass> = new Set(['invalid_recipient', 'bad_domain']);

type TextRule = { class: BounceClass; contains: string[]; when?: 'permanent' | 'temporary' };
export type BounceRules = { codes: Map<string, BounceClass>; text: TextRule[]; fallback: Map<string, BounceClass> };
export type Classified = { bounceClass: BounceClass; permanent: boolean | undefined };

/** The rules file shipped at the repository root. */
export const SHIPPED_RULES_FILE = fileURLToPath(new URL('../../bounce-rules.toml', import.meta.url));
/** How much of a remote answer is read: the class is in its first lines, and the work stays bounded. */
export const MAX_TEXT = 2000;
const MAX_RULES = 1000;
const MAX_SUBSTRINGS = 200;

const isClass = (v: unknown): v is BounceClass =>
  typeof v === 'string' && (BOUNCE_CLASSES as readonly string[]).includes(v);
const CODE_KEY = /^(?:[245x](?:\.\d{1,3}(?:\.\d{1,3})?)?)$/;

function classOf(v: unknown, where: string): BounceClass {
  if (!isClass(v))
    throw new Error(`${where}: "${String(v)}" is not a bounce class (one of ${BOUNCE_CLASSES.join(', ')})`);
  return v;
}

function codeTable(v: unknown, where: string): Map<string, BounceClass> {
  const out = new Map<string, BounceClass>();
  if (v === undefined) return out;
  if (typeof v !== 'object' || v === null || Array.isArray(v))
    throw new Error(`[${where}] must be a table of "code" = "class"`);
  for (const [k, c] of Object.entries(v)) {
    const key = k.toLowerCase();
    if (!CODE_KEY.test(key))
      throw new Error(`[${where}] key "${k}": expected an enhanced status code such as "5.1.1", "x.1.1", "5.7" or "5"`);
    out.set(key, classOf(c, `[${where}] "${k}"`));
  }
  return out;
}

function textRules(v: unknown, where: string): TextRule[] {
  if (v === undefined) return [];
  if (!Array.isArray(v) || v.length > MAX_RULES)
    throw new Error(`${where}: [[text]] must be an array of at most ${MAX_RULES} tables`);
  return v.map((r: Record<string, unknown>, i) => {
    const at = `${where}: [[text]] #${i + 1}`;
    const contains = r.contains;
    if (
      !Array.isArray(contains) ||
      contains.length === 0 ||
      contains.length > MAX_SUBSTRINGS ||
      contains.some((s) => typeof s !== 'string' || s.length === 0 || s.length > 200)
    ) {
      throw new Error(`${at}: "contains" must be a non-empty array of strings (1 to 200 characters each)`);
    }
    if (r.when !== undefined && r.when !== 'permanent' && r.when !== 'temporary')
      throw new Error(`${at}: "when" must be "permanent" or "temporary"`);
    return {
      class: classOf(r.class, at),
      contains: (contains as string[]).map((s) => s.toLowerCase()),
      when: r.when as TextRule['when'],
    };
  });
}

/** Parses one rules file's text (TOML); throws naming the bad entry. */
export function parseBounceRules(text: string, where = 'bounce rules'): BounceRules {
  const t = parse(text) as Record<string, unknown>;
  return {
    codes: codeTable(t.codes, 'codes'),
    text: textRules(t.text, where),
    fallback: codeTable(t.fallback, 'fallback'),
  };
}

/** `extra` on top of `base`: its code and fallback keys win, its text rules are tried first. */
export function mergeBounceRules(base: BounceRules, extra: BounceRules): BounceRules {
  return {
    codes: new Map([...base.codes, ...extra.codes]),
    text: [...extra.text, ...base.text],
    fallback: new Map([...base.fallback, ...extra.fallback]),
  };
}

/** The shipped rules, plus the operator's file (BOUNCE_RULES_FILE) when given. */
export function loadBounceRules(operatorFile?: string): BounceRules {
  const shipped = parseBounceRules(readFileSync(SHIPPED_RULES_FILE, 'utf8'), SHIPPED_RULES_FILE);
  return operatorFile
    ? mergeBounceRules(shipped, parseBounceRules(readFileSync(operatorFile, 'utf8'), operatorFile))
    : shipped;
}

let shipped: BounceRules | undefined;
/** The shipped rules, read once (for callers not handed the configured rules). */
export const defaultBounceRules = () => (shipped ??= loadBounceRules());

const isDigit = (c: string | undefined) => c !== undefined && c >= '0' && c <= '9';

/** An enhanced status code (RFC 3463) starting at `i`: `[245].d{1,3}.d{1,3}`, not part of a longer number. */
function enhancedAt(s: string, i: number): string | undefined {
  if (!'245'.includes(s[i]!) || isDigit(s[i - 1]) || s[i - 1] === '.' || s[i + 1] !== '.') return undefined;
  let j = i + 2;
  const subjectStart = j;
  while (isDigit(s[j]) && j - subjectStart < 4) j++;
  if (j === subjectStart || j - subjectStart > 3 || s[j] !== '.') return undefined;
  const detailStart = ++j;
  while (isDigit(s[j]) && j - detailStart < 4) j++;
  if (j === detailStart || j - detailStart > 3 || isDigit(s[j]) || (s[j] === '.' && isDigit(s[j + 1])))
    return undefined;
  return s.slice(i, j);
}

/** The first enhanced status code in (bounded) text: one forward scan, no backtracking. */
export function findEnhancedCode(text: string): string | undefined {
  const s = text.length > MAX_TEXT ? text.slice(0, MAX_TEXT) : text;
  for (let i = 0; i < s.length; i++) {
    const c = enhancedAt(s, i);
    if (c) return c;
  }
  return undefined;
}

/** The basic reply code (`550`) an answer starts with, after the `smtp;` type of a DSN if any. */
function basicCode(s: string): string | undefined {
  const t = s.trimStart();
  return '245'.includes(t[0] ?? '') && isDigit(t[1]) && isDigit(t[2]) && !isDigit(t[3]) ? t.slice(0, 3) : undefined;
}

/** Lookup keys of a code, class-specific first: depth 3 gives "5.1.1", "x.1.1"; depth 2 gives "5.1", "x.1". */
const keysOf = (code: string, depth: 2 | 3) => {
  const parts = code.split('.');
  const tail = parts.slice(1, depth).join('.');
  return [`${parts[0]}.${tail}`, `x.${tail}`];
};

/**
 * The class of one failed or deferred outcome: the enhanced status code first (the DSN's Status field,
 * then the one in the text), then the text rules, then the fallback by code. `text` is the remote answer
 * or the DSN's diagnostic; `permanent` says how the outcome ended when no code says it (a network failure).
 * Linear in the (bounded) text: substring search only.
 */
export function classifyBounce(
  rules: BounceRules,
  input: { text: string | null | undefined; status?: string | null; permanent?: boolean },
): Classified {
  const text = (input.text ?? '').slice(0, MAX_TEXT);
  const status = input.status ? findEnhancedCode(input.status) : undefined;
  const codes = [status, findEnhancedCode(text)].filter((c): c is string => Boolean(c));
  const basic = basicCode(text);
  const classDigit = codes[0]?.[0] ?? basic?.[0];
  const permanent = classDigit ? classDigit === '5' : input.permanent;
  const done = (bounceClass: BounceClass): Classified => ({ bounceClass, permanent });

  for (const code of codes)
    for (const key of keysOf(code, 3)) {
      const hit = rules.codes.get(key);
      if (hit) return done(hit);
    }
  const lower = text.toLowerCase();
  for (const rule of rules.text) {
    if (rule.when === 'permanent' && permanent !== true) continue;
    if (rule.when === 'temporary' && permanent !== false) continue;
    if (rule.contains.some((s) => lower.includes(s))) return done(rule.class);
  }
  const code = codes[0];
  for (const key of [...(code ? keysOf(code, 2) : []), ...(classDigit ? [classDigit] : [])]) {
    const hit = rules.fallback.get(key);
    if (hit) return done(hit);
  }
  return done(permanent === false ? 'transient' : 'other');
}

/** Whether an outcome suppresses its address: a permanent failure of a recipient-level hard class, nothing else. */
export const suppresses = (c: Classified) => c.permanent === true && SUPPRESSING.has(c.bounceClass);
