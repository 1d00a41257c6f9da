import { readFileSync } from 'node:fs';
import { parse } from 'smol-toml';
import { parseCount, parseDuration, parseRate, type Rate } from './values.js';

/**
 * shaping.toml in KumoMTA's format (docs/deliverability.md): a `["default"]` table, one table per
 * destination domain (`["gmail.com"]`, applied to that domain's whole site unless `mx_rollup = false`),
 * `[provider.<name>]` tables matched by MX host suffix (`match = [{ MXSuffix = ".google.com" }]`), and
 * `[["<table>".automation]]` rules that map a remote answer to an action for a while.
 */

/** Effective limits of a site: concurrent connections, messages/s, new connections/s (null: no limit), messages per connection. */
export type Limits = {
  connectionLimit: number;
  maxMessageRate: Rate | null;
  maxConnectionRate: Rate | null;
  maxDeliveriesPerConnection: number;
};
export type LimitName =
  'connection_limit' | 'max_message_rate' | 'max_connection_rate' | 'max_deliveries_per_connection';
export type Action = { kind: 'suspend' } | { kind: 'set'; name: LimitName; value: string };
export type Rule = { table: string; pattern: string; regex: RegExp; actions: Action[]; durationMs: number };
export type Entry = { name: string; patch: Partial<Limits>; mxRollup: boolean; rules: Rule[] };
export type Provider = Entry & { mxSuffixes: string[]; domainSuffixes: string[] };
export type ShapingConfig = {
  file: string | null;
  defaults: Limits;
  defaultRules: Rule[];
  domains: Map<string, Entry>;
  providers: Provider[];
};

export class ShapingFileError extends Error {}

/** Built in when the file has no `["default"]` (or sets only some keys). */
export const BUILTIN_LIMITS: Limits = {
  connectionLimit: 10,
  maxMessageRate: null,
  maxConnectionRate: null,
  maxDeliveriesPerConnection: 100,
};
/** Longest remote answer a rule is matched against (the rest is cut off), so a rule's cost is bounded. */
export const MAX_ANSWER_BYTES = 512;

const LIMIT_KEYS: Record<LimitName, (v: unknown) => [keyof Limits, number | Rate]> = {
  connection_limit: (v) => ['connectionLimit', parseCount(v)],
  max_message_rate: (v) => ['maxMessageRate', parseRate(v)],
  max_connection_rate: (v) => ['maxConnectionRate', parseRate(v)],
  max_deliveries_per_connection: (v) => ['maxDeliveriesPerConnection', parseCount(v)],
};
const isLimitName = (k: string): k is LimitName => Object.hasOwn(LIMIT_KEYS, k);

/** One limit key's value, parsed (also the value of a SetConfig action). */
export function parseLimit(name: LimitName, value: unknown): Partial<Limits> {
  const [key, parsed] = LIMIT_KEYS[name](value);
  return { [key]: parsed };
}

/** Reads and validates the file; every problem is a ShapingFileError naming the file, table and key. */
export function loadShapingFile(file: string): ShapingConfig {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ShapingFileError(`SHAPING_FILE ${file}: cannot read it (${(err as Error).message})`);
  }
  return parseShaping(text, file);
}

/** Parses shaping.toml text (`file` only names it in errors). */
export function parseShaping(text: string, file: string | null = null): ShapingConfig {
  const where = file ?? 'shaping.toml';
  let doc: Record<string, unknown>;
  try {
    doc = parse(text) as Record<string, unknown>;
  } catch (err) {
    throw new ShapingFileError(`${where}: not valid TOML: ${(err as Error).message}`);
  }
  const fail = (table: string, msg: string): never => {
    throw new ShapingFileError(`${where}: [${JSON.stringify(table)}] ${msg}`);
  };
  const config: ShapingConfig = {
    file,
    defaults: { ...BUILTIN_LIMITS },
    defaultRules: [],
    domains: new Map(),
    providers: [],
  };
  for (const [name, value] of Object.entries(doc)) {
    if (name === 'provider') {
      if (!isTable(value)) fail(name, 'must be a table of providers');
      for (const [pname, pvalue] of Object.entries(value as Record<string, unknown>))
        config.providers.push(providerOf(`provider.${pname}`, pvalue, fail));
      continue;
    }
    if (!isTable(value)) fail(name, 'must be a table');
    const entry = entryOf(name, value as Record<string, unknown>, fail, []);
    if (name === 'default') {
      if (!entry.mxRollup) fail(name, 'mx_rollup applies to domain tables only');
      Object.assign(config.defaults, entry.patch);
      config.defaultRules = entry.rules;
    } else {
      const domain = name.toLowerCase();
      if (!/^[a-z0-9-]{1,63}(\.[a-z0-9-]{1,63}){1,10}$/.test(domain))
        fail(name, 'is not a domain name (tables are "default", a domain, or provider.<name>)');
      config.domains.set(domain, { ...entry, name: domain });
    }
  }
  return config;
}

function providerOf(name: string, value: unknown, fail: (t: string, m: string) => never): Provider {
  if (!isTable(value)) fail(name, 'must be a table');
  const table = value as Record<string, unknown>;
  const match = table.match;
  if (!Array.isArray(match) || match.length === 0) fail(name, 'needs match = [{ MXSuffix = ".example.net" }, …]');
  const mxSuffixes: string[] = [];
  const domainSuffixes: string[] = [];
  for (const m of match as unknown[]) {
    const rec = isTable(m) ? (m as Record<string, unknown>) : {};
    const [kind, suffix] = Object.entries(rec)[0] ?? [];
    if (Object.keys(rec).length !== 1 || typeof suffix !== 'string' || !suffix)
      fail(name, 'match items are { MXSuffix = "…" } or { DomainSuffix = "…" }');
    if (kind === 'MXSuffix') mxSuffixes.push(suffix!.toLowerCase());
    else if (kind === 'DomainSuffix') domainSuffixes.push(suffix!.toLowerCase());
    else fail(name, `unknown match kind ${JSON.stringify(kind)} (MXSuffix or DomainSuffix)`);
  }
  const entry = entryOf(name, table, fail, ['match']);
  if (!entry.mxRollup) fail(name, 'mx_rollup applies to domain tables only');
  return { ...entry, mxSuffixes, domainSuffixes };
}

function entryOf(
  name: string,
  table: Record<string, unknown>,
  fail: (t: string, m: string) => never,
  extra: string[],
): Entry {
  const patch: Partial<Limits> = {};
  let mxRollup = true;
  let rules: Rule[] = [];
  for (const [key, value] of Object.entries(table)) {
    if (extra.includes(key)) continue;
    if (key === 'mx_rollup') {
      if (typeof value !== 'boolean') fail(name, 'mx_rollup must be true or false');
      mxRollup = value as boolean;
    } else if (key === 'automation') {
      if (!Array.isArray(value))
        fail(name, `automation must be an array of tables: [[${JSON.stringify(name)}.automation]]`);
      rules = (value as unknown[]).map((r, i) => ruleOf(name, i, r, fail));
    } else if (isLimitName(key)) {
      try {
        Object.assign(patch, parseLimit(key, value));
      } catch (err) {
        fail(name, `${key}: ${(err as Error).message}`);
      }
    } else {
      fail(
        name,
        `unknown key ${JSON.stringify(key)} (known: ${[...Object.keys(LIMIT_KEYS), 'mx_rollup', 'automation'].join(', ')})`,
      );
    }
  }
  return { name, patch, mxRollup, rules };
}

function ruleOf(table: string, index: number, value: unknown, fail: (t: string, m: string) => never): Rule {
  const at = `automation #${index + 1}`;
  if (!isTable(value)) fail(table, `${at} must be a table`);
  const r = value as Record<string, unknown>;
  for (const key of Object.keys(r))
    if (!['regex', 'action', 'duration'].includes(key))
      fail(table, `${at}: unknown key ${JSON.stringify(key)} (regex, action, duration)`);
  const patterns = typeof r.regex === 'string' ? [r.regex] : Array.isArray(r.regex) ? r.regex : [];
  if (patterns.length === 0 || patterns.some((p) => typeof p !== 'string' || !p))
    fail(table, `${at}: regex must be a non-empty string (or an array of them)`);
  const pattern =
    patterns.length === 1 ? (patterns[0] as string) : (patterns as string[]).map((p) => `(?:${p})`).join('|');
  let regex: RegExp;
  try {
    regex = compileRule(pattern);
  } catch (err) {
    return fail(table, `${at}: regex ${JSON.stringify(pattern)}: ${(err as Error).message}`);
  }
  const actions = (Array.isArray(r.action) ? r.action : [r.action]).map((a) =>
    actionOf(a, (m) => fail(table, `${at}: ${m}`)),
  );
  let durationMs = 0;
  try {
    durationMs = parseDuration(r.duration);
  } catch (err) {
    fail(table, `${at}: duration: ${(err as Error).message}`);
  }
  if (durationMs <= 0) fail(table, `${at}: duration must be more than 0`);
  return { table, pattern, regex, actions, durationMs };
}

function actionOf(value: unknown, fail: (m: string) => never): Action {
  if (value === 'Suspend') return { kind: 'suspend' };
  const set = isTable(value) ? (value as Record<string, unknown>).SetConfig : undefined;
  if (!isTable(set) || Object.keys(value as object).length !== 1)
    return fail('action must be "Suspend" or { SetConfig = { name = "max_message_rate", value = "10/min" } }');
  const { name, value: v } = set as Record<string, unknown>;
  if (typeof name !== 'string' || !isLimitName(name))
    return fail(`SetConfig name must be one of ${Object.keys(LIMIT_KEYS).join(', ')}`);
  try {
    parseLimit(name, v);
  } catch (err) {
    return fail(`SetConfig ${name}: ${(err as Error).message}`);
  }
  return { kind: 'set', name, value: String(v) };
}

/**
 * Compiles a rule's regex. Patterns come from the operator's file only and run against at most
 * MAX_ANSWER_BYTES of answer; on top of that, what makes a backtracking engine blow up is refused:
 * back-references, lookaround, and a repeated group that itself repeats or alternates.
 * A leading `(?i)` (Rust/KumoMTA syntax) makes the match case-insensitive.
 */
export function compileRule(pattern: string): RegExp {
  let source = pattern;
  let flags = '';
  if (source.startsWith('(?i)')) {
    source = source.slice(4);
    flags = 'i';
  }
  if (/\\[1-9]|\\k</.test(source)) throw new Error('back-references are not allowed');
  if (/\(\?<?[=!]/.test(source)) throw new Error('lookaround is not allowed');
  // Each open group remembers whether it holds a quantifier or an alternation; a quantifier after it closes then nests.
  const stack: { risky: boolean }[] = [];
  let lastClosedRisky = false;
  for (let i = 0; i < source.length; i++) {
    const c = source[i]!;
    if (c === '\\') {
      i++;
      lastClosedRisky = false;
      continue;
    }
    if (c === '[') {
      const end = classEnd(source, i);
      i = end;
      lastClosedRisky = false;
      continue;
    }
    if (c === '(') {
      stack.push({ risky: false });
      lastClosedRisky = false;
      continue;
    }
    if (c === ')') {
      lastClosedRisky = stack.pop()?.risky ?? false;
      continue;
    }
    const quantifier =
      c === '*' || c === '+' || c === '?' || (c === '{' && /^\{\d{1,4}(,\d{0,4})?\}/.test(source.slice(i, i + 12)));
    if (quantifier || c === '|') {
      if (quantifier && lastClosedRisky)
        throw new Error('a repeated group may not itself repeat or alternate (nested quantifiers)');
      const top = stack[stack.length - 1];
      if (top && !(c === '?' && source[i - 1] === '(')) top.risky = true;
    }
    lastClosedRisky = false;
  }
  return new RegExp(source, flags);
}

function classEnd(source: string, start: number): number {
  for (let i = start + 1; i < source.length; i++) {
    if (source[i] === '\\') i++;
    else if (source[i] === ']' && i > start + 1) return i;
  }
  return source.length;
}

const isTable = (v: unknown): boolean =>
  typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Date);
