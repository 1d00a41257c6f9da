/**
 * Additive comparison of JSON Schemas (SPEC.md, Versioning: "fields are added, never removed or
 * repurposed"). A new schema is compatible with an old one when every documented field is still there,
 * no field became required, and nothing accepts less than before: types, enums and consts, bounds,
 * patterns and formats may only widen. Annotations (description, title, default, examples) are ignored.
 */
type Schema = Record<string, unknown>;

const ANNOTATIONS = new Set(['description', 'title', 'default', 'examples', '$id', '$schema', '$comment']);
const SUBSCHEMA = new Set(['items', 'additionalProperties', 'propertyNames']);
const UNIONS = ['anyOf', 'oneOf'] as const;
const LOWER_BOUNDS = ['minimum', 'exclusiveMinimum', 'minLength', 'minItems', 'minProperties'];
const UPPER_BOUNDS = ['maximum', 'exclusiveMaximum', 'maxLength', 'maxItems', 'maxProperties'];
const HANDLED = new Set([
  'type',
  'enum',
  'const',
  'properties',
  'required',
  ...UNIONS,
  ...SUBSCHEMA,
  ...LOWER_BOUNDS,
  ...UPPER_BOUNDS,
  'pattern',
  'format',
]);

const isObject = (v: unknown): v is Schema => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The schema without annotations, for the committed snapshot (a `properties` map keeps every field name). */
export function stripAnnotations(s: unknown): unknown {
  if (!isObject(s)) return s;
  const out: Schema = {};
  for (const [k, v] of Object.entries(s)) {
    if (ANNOTATIONS.has(k)) continue;
    if (k === 'properties' && isObject(v))
      out[k] = Object.fromEntries(Object.entries(v).map(([name, p]) => [name, stripAnnotations(p)]));
    else if (SUBSCHEMA.has(k)) out[k] = stripAnnotations(v);
    else if ((k === 'anyOf' || k === 'oneOf' || k === 'allOf') && Array.isArray(v)) out[k] = v.map(stripAnnotations);
    else out[k] = v;
  }
  return out;
}

const jsonType = (v: unknown) =>
  v === null
    ? 'null'
    : Array.isArray(v)
      ? 'array'
      : typeof v === 'number'
        ? Number.isInteger(v)
          ? 'integer'
          : 'number'
        : typeof v;
const valuesOf = (s: Schema): unknown[] | undefined =>
  'const' in s ? [s.const] : Array.isArray(s.enum) ? s.enum : undefined;
/** The JSON types a schema admits; undefined = any. */
function typesOf(s: Schema): string[] | undefined {
  if (s.type !== undefined) return Array.isArray(s.type) ? (s.type as string[]) : [s.type as string];
  return valuesOf(s)?.map(jsonType);
}
/** The alternatives of a union (nested unions flattened); a plain schema is its own one alternative. */
function alternatives(s: unknown): Schema[] {
  if (!isObject(s)) return [{}];
  const union = UNIONS.find((k) => Array.isArray(s[k]));
  return union ? (s[union] as unknown[]).flatMap(alternatives) : [s];
}
const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

/** Every way `next` accepts less than, or documents less than, `prev`: empty when the change is additive. */
export function breakingChanges(prev: unknown, next: unknown, path = '$'): string[] {
  const news = alternatives(next);
  const out: string[] = [];
  for (const old of alternatives(prev)) {
    const tries = news.map((n) => compareOne(old, n, path));
    if (tries.some((t) => t.length === 0)) continue;
    // Report against the closest alternative (the one of the same type, or with the fewest problems).
    const sameType = news.findIndex((n) => same(typesOf(n), typesOf(old)));
    out.push(...(sameType >= 0 ? tries[sameType]! : tries.reduce((a, b) => (b.length < a.length ? b : a))));
  }
  return out;
}

function compareOne(old: Schema, next: Schema, path: string): string[] {
  const out: string[] = [];
  const oldTypes = typesOf(old);
  const newTypes = typesOf(next);
  if (newTypes && !oldTypes) out.push(`${path}: narrowed from any value to ${newTypes.join('|')}`);
  for (const t of oldTypes ?? []) {
    if (newTypes && !newTypes.includes(t) && !(t === 'integer' && newTypes.includes('number')))
      out.push(`${path}: type ${t} no longer accepted (now ${newTypes.join('|')})`);
  }
  const oldValues = valuesOf(old);
  const newValues = valuesOf(next);
  if (newValues && !oldValues) out.push(`${path}: restricted to ${JSON.stringify(newValues)}`);
  for (const v of oldValues ?? [])
    if (newValues && !newValues.some((n) => same(n, v))) out.push(`${path}: value ${JSON.stringify(v)} removed`);
  for (const k of LOWER_BOUNDS)
    if (typeof next[k] === 'number' && (typeof old[k] !== 'number' || next[k] > old[k]))
      out.push(`${path}: ${k} raised to ${next[k]}`);
  for (const k of UPPER_BOUNDS)
    if (typeof next[k] === 'number' && (typeof old[k] !== 'number' || next[k] < old[k]))
      out.push(`${path}: ${k} lowered to ${next[k]}`);
  for (const k of ['pattern', 'format'])
    if (next[k] !== undefined && !same(next[k], old[k])) out.push(`${path}: ${k} now ${JSON.stringify(next[k])}`);
  out.push(...compareObject(old, next, path));
  if (next.additionalProperties === false && old.additionalProperties !== false)
    out.push(`${path}: no longer accepts other properties`);
  else if (old.additionalProperties !== false && isObject(next.additionalProperties)) {
    out.push(
      ...breakingChanges(old.additionalProperties ?? {}, next.additionalProperties, `${path}.<additionalProperties>`),
    );
  }
  for (const k of ['items', 'propertyNames']) {
    if (old[k] !== undefined || next[k] !== undefined)
      out.push(...breakingChanges(old[k] ?? {}, next[k] ?? {}, `${path}.<${k}>`));
  }
  for (const k of new Set([...Object.keys(old), ...Object.keys(next)])) {
    if (!HANDLED.has(k) && !ANNOTATIONS.has(k) && !same(old[k], next[k])) out.push(`${path}: ${k} changed`);
  }
  return out;
}

function compareObject(old: Schema, next: Schema, path: string): string[] {
  const out: string[] = [];
  const oldProps = (old.properties ?? {}) as Record<string, unknown>;
  const newProps = (next.properties ?? {}) as Record<string, unknown>;
  for (const [name, p] of Object.entries(oldProps)) {
    if (!(name in newProps)) out.push(`${path}.${name}: field removed`);
    else out.push(...breakingChanges(p, newProps[name], `${path}.${name}`));
  }
  const wasRequired = new Set((old.required ?? []) as string[]);
  for (const name of (next.required ?? []) as string[])
    if (!wasRequired.has(name)) out.push(`${path}.${name}: became required`);
  return out;
}
