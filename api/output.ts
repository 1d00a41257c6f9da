import type { z } from 'zod';

/**
 * What every transport answers: the handler's result parsed with the operation's output schema, in
 * every mode (production included), so a field the schema does not declare never reaches a client and
 * a test sees the bytes production serves.
 *
 * Why strip rather than refuse in production: an undeclared field is a schema bug, and a 500 on every
 * call of that route would turn it into an outage while stripping already keeps the field in. Outside
 * production (`strict`), the same bug fails the call instead (500, logged with the field's path), so a
 * test that walks a route finds it at once rather than passing on a silently stripped answer.
 */
export function outputOf(schema: z.ZodType, result: unknown, opts: { strict: boolean; operation: string }): unknown {
  const parsed = schema.safeParse(result);
  // Not a ZodError: the errors module would answer it as the caller's 400 validation error.
  if (!parsed.success)
    throw new OutputMismatchError(
      opts.operation,
      parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`),
    );
  if (opts.strict) {
    const extra = undeclaredPaths(result, parsed.data);
    if (extra.length > 0)
      throw new OutputMismatchError(
        opts.operation,
        extra.map((p) => `${p}: not declared by the output schema`),
      );
  }
  return parsed.data;
}

/** A handler answered something its output schema refuses: a server bug, answered 500 and logged. */
export class OutputMismatchError extends Error {
  constructor(operation: string, problems: string[]) {
    super(`${operation}: the answer does not match its output schema (${problems.slice(0, 5).join('; ')})`);
    this.name = 'OutputMismatchError';
  }
}

const isPlainObject = (v: unknown): v is Record<string, unknown> => {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  const proto = Object.getPrototypeOf(v) as unknown;
  return proto === Object.prototype || proto === null;
};

/**
 * Paths of keys present in `raw` that the parse dropped: the fields a client would have got unparsed.
 * Keys whose value is undefined are not counted (JSON leaves them out anyway).
 */
export function undeclaredPaths(raw: unknown, parsed: unknown, path = '', out: string[] = []): string[] {
  if (Array.isArray(raw) && Array.isArray(parsed)) {
    raw.forEach((item, i) => undeclaredPaths(item, parsed[i], `${path}[${i}]`, out));
  } else if (isPlainObject(raw) && isPlainObject(parsed)) {
    for (const [key, value] of Object.entries(raw)) {
      if (value === undefined) continue;
      const at = path ? `${path}.${key}` : key;
      if (!(key in parsed)) out.push(at);
      else undeclaredPaths(value, parsed[key], at, out);
    }
  }
  return out;
}
