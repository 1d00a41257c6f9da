import { sql, type SQL } from 'drizzle-orm';
import { schema } from '../../db/index.js';
import { badRequest } from '../errors.js';

/**
 * The audience filter language (README.md, "Filter language"): conditions over contact fields and
 * attributes joined by `and` / `or`, negated by `not`, grouped by parentheses. Parsed by a hand-written
 * linear tokenizer and recursive-descent parser into a tree, then compiled to parameterized SQL;
 * nothing of the query text reaches SQL or code except as a bound value.
 *
 *   attributes.plan = "pro" and last_seen_at > 2026-01-01
 *   not (name contains "test") or attributes.score >= 10
 */
export type Value = string | number | boolean | null;
export type Op = '=' | '!=' | '>' | '>=' | '<' | '<=' | 'contains' | 'starts_with' | 'exists';
export type Field =
  | { kind: 'column'; name: 'email' | 'name' | 'created_at' | 'last_seen_at' | 'subscribed' }
  | { kind: 'attribute'; key: string };
export type Node =
  | { type: 'and' | 'or'; left: Node; right: Node }
  | { type: 'not'; expr: Node }
  | { type: 'cmp'; field: Field; op: Op; value: Value };

type Token = { kind: 'word' | 'string' | 'op' | 'lparen' | 'rparen'; text: string; at: number };

export const FILTER_LIMITS = { length: 2000, conditions: 50, depth: 16 };
const COLUMNS = new Set(['email', 'name', 'created_at', 'last_seen_at', 'subscribed']);
const DATE = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?(Z|[+-]\d{2}:\d{2})?)?$/;
const NUMBER = /^-?\d{1,15}(\.\d{1,6})?$/;
const fail = (message: string, at?: number) =>
  badRequest(`audience.query: ${message}${at === undefined ? '' : ` (at character ${at + 1})`}`, 'invalid_filter');

/** Splits the query into tokens in one pass (no regex over the whole input, no backtracking). */
function tokenize(q: string): Token[] {
  const out: Token[] = [];
  let i = 0;
  const isWord = (ch: string) => /[A-Za-z0-9_.:+-]/.test(ch);
  while (i < q.length) {
    const ch = q[i]!;
    if (ch === ' ' || ch === '\t' || ch === '\n' || ch === '\r') {
      i++;
      continue;
    }
    if (ch === '(' || ch === ')') {
      out.push({ kind: ch === '(' ? 'lparen' : 'rparen', text: ch, at: i });
      i++;
      continue;
    }
    if (ch === '"') {
      let s = '';
      let j = i + 1;
      for (; j < q.length && q[j] !== '"'; j++) {
        if (q[j] === '\\' && j + 1 < q.length) j++;
        s += q[j];
      }
      if (j >= q.length) throw fail('unterminated string', i);
      out.push({ kind: 'string', text: s, at: i });
      i = j + 1;
      continue;
    }
    if ('=!<>'.includes(ch)) {
      const two = q.slice(i, i + 2);
      const op = ['!=', '>=', '<='].includes(two) ? two : ch;
      if (op === '!') throw fail('expected != ', i);
      out.push({ kind: 'op', text: op, at: i });
      i += op.length;
      continue;
    }
    if (!isWord(ch)) throw fail(`unexpected character "${ch}"`, i);
    let j = i;
    while (j < q.length && isWord(q[j]!)) j++;
    out.push({ kind: 'word', text: q.slice(i, j), at: i });
    i = j;
  }
  return out;
}

/** Parses a filter query into its tree; 400 `invalid_filter` with the position on any error. */
export function parseFilter(query: string): Node {
  if (query.length > FILTER_LIMITS.length) throw fail(`longer than ${FILTER_LIMITS.length} characters`);
  const tokens = tokenize(query);
  let pos = 0;
  let conditions = 0;
  const peek = () => tokens[pos];
  const keyword = (w: string) => peek()?.kind === 'word' && peek()!.text.toLowerCase() === w;

  function or(depth: number): Node {
    let left = and(depth);
    while (keyword('or')) {
      pos++;
      left = { type: 'or', left, right: and(depth) };
    }
    return left;
  }
  function and(depth: number): Node {
    let left = unary(depth);
    while (keyword('and')) {
      pos++;
      left = { type: 'and', left, right: unary(depth) };
    }
    return left;
  }
  function unary(depth: number): Node {
    if (depth > FILTER_LIMITS.depth) throw fail(`nested deeper than ${FILTER_LIMITS.depth}`, peek()?.at);
    if (keyword('not')) {
      pos++;
      return { type: 'not', expr: unary(depth + 1) };
    }
    if (peek()?.kind === 'lparen') {
      pos++;
      const inner = or(depth + 1);
      if (peek()?.kind !== 'rparen') throw fail('expected ")"', peek()?.at ?? query.length);
      pos++;
      return inner;
    }
    return comparison();
  }
  function comparison(): Node {
    if (++conditions > FILTER_LIMITS.conditions) throw fail(`more than ${FILTER_LIMITS.conditions} conditions`);
    const t = tokens[pos++];
    if (!t || t.kind !== 'word') throw fail('expected a field', t?.at ?? query.length);
    const field = fieldOf(t);
    const o = tokens[pos++];
    if (!o) throw fail('expected an operator', query.length);
    const opText = o.text.toLowerCase();
    if (o.kind === 'word' && opText === 'exists') return { type: 'cmp', field, op: 'exists', value: null };
    if (!(o.kind === 'op' || (o.kind === 'word' && (opText === 'contains' || opText === 'starts_with'))))
      throw fail(`unknown operator "${o.text}"`, o.at);
    const v = tokens[pos++];
    if (!v || (v.kind !== 'word' && v.kind !== 'string')) throw fail('expected a value', v?.at ?? query.length);
    return { type: 'cmp', field, op: opText as Op, value: valueOf(v) };
  }
  const node = or(0);
  if (pos < tokens.length) throw fail(`unexpected "${tokens[pos]!.text}"`, tokens[pos]!.at);
  return node;
}

function fieldOf(t: Token): Field {
  const name = t.text.toLowerCase();
  if (COLUMNS.has(name)) return { kind: 'column', name: name as Extract<Field, { kind: 'column' }>['name'] };
  if (t.text.startsWith('attributes.') && /^[A-Za-z0-9_-]{1,64}$/.test(t.text.slice(11)))
    return { kind: 'attribute', key: t.text.slice(11) };
  throw fail(`unknown field "${t.text}" (email, name, created_at, last_seen_at, subscribed, attributes.<key>)`, t.at);
}

function valueOf(t: Token): Value {
  if (t.kind === 'string') return t.text;
  const w = t.text.toLowerCase();
  if (w === 'true' || w === 'false') return w === 'true';
  if (w === 'null') return null;
  if (NUMBER.test(t.text)) return Number(t.text);
  if (DATE.test(t.text)) return t.text;
  throw fail(`"${t.text}" is not a value: quote strings, e.g. "${t.text}"`, t.at);
}

const c = schema.contacts;
const TIME = { created_at: c.createdAt, last_seen_at: c.lastSeenAt } as const;
const ORDER: Record<string, string> = { '>': '>', '>=': '>=', '<': '<', '<=': '<=' };

function toMs(v: Value, field: string): number {
  if (typeof v === 'number') return v;
  if (typeof v === 'string' && DATE.test(v)) return Date.parse(v.length === 10 ? `${v}T00:00:00Z` : v);
  throw fail(`${field} compares with a date (YYYY-MM-DD or ISO 8601) or a ms epoch`);
}

/** Compiles one comparison to SQL over `contacts`; every value is a bound parameter. */
function compileCmp(n: Extract<Node, { type: 'cmp' }>): SQL {
  const { field, op, value } = n;
  const like = (v: Value, prefix: boolean) => `${prefix ? '' : '%'}${String(v).replace(/[%_\\]/g, '\\$&')}%`;
  if (field.kind === 'attribute') {
    const json = sql`${c.attributes} -> ${field.key}`;
    const text = sql`${c.attributes} ->> ${field.key}`;
    if (op === 'exists') return sql`${c.attributes} ? ${field.key}`;
    if (op === '=') return sql`${json} = ${JSON.stringify(value)}::jsonb`;
    if (op === '!=') return sql`${json} is distinct from ${JSON.stringify(value)}::jsonb`;
    if (op === 'contains' || op === 'starts_with') return sql`${text} ilike ${like(value, op === 'starts_with')}`;
    const cmp = sql.raw(ORDER[op]!);
    if (typeof value === 'number')
      return sql`(case when jsonb_typeof(${json}) = 'number' then (${text})::numeric end) ${cmp} ${value}`;
    return sql`(case when jsonb_typeof(${json}) = 'string' then ${text} end) ${cmp} ${String(value)}`;
  }
  const name = field.name;
  if (name === 'subscribed') {
    if (typeof value !== 'boolean' || (op !== '=' && op !== '!='))
      throw fail('subscribed compares with = or != true/false');
    return op === '=' ? sql`${c.subscribed} = ${value}` : sql`${c.subscribed} <> ${value}`;
  }
  if (name === 'created_at' || name === 'last_seen_at') {
    const col = TIME[name];
    if (op === 'exists') return sql`${col} is not null`;
    if (op === 'contains' || op === 'starts_with') throw fail(`${name} does not take ${op}`);
    if (op === '=' || op === '!=') return sql`${col} ${sql.raw(op === '=' ? '=' : '<>')} ${toMs(value, name)}`;
    return sql`${col} ${sql.raw(ORDER[op]!)} ${toMs(value, name)}`;
  }
  const col = name === 'email' ? c.email : c.name;
  if (op === 'exists') return sql`${col} is not null`;
  if (op === 'contains' || op === 'starts_with') return sql`${col} ilike ${like(value, op === 'starts_with')}`;
  const v = name === 'email' ? String(value).toLowerCase() : String(value);
  if (op === '=') return sql`${col} = ${v}`;
  if (op === '!=') return sql`${col} is distinct from ${v}`;
  return sql`${col} ${sql.raw(ORDER[op]!)} ${v}`;
}

/** Compiles a parsed filter to a SQL condition over `contacts`. */
export function compileFilter(node: Node): SQL {
  if (node.type === 'cmp') return compileCmp(node);
  if (node.type === 'not') return sql`not coalesce((${compileFilter(node.expr)}), false)`;
  return sql`(${compileFilter(node.left)} ${sql.raw(node.type)} ${compileFilter(node.right)})`;
}
