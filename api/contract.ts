import { z } from 'zod';
import type { CredentialKind, Principal } from '../core/auth.js';
import type { Core } from '../core/index.js';

export type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyObject = z.ZodObject<any>;

/** What a handler receives besides its input: the caller, core services and the request's origin. */
export type OpContext = { core: Core; principal: Principal | undefined; clientIp: string };

/**
 * One operation, defined once: its REST route (method + SPEC.md path), its tRPC procedure (`name`),
 * and the JSON Schemas of its request and response all come from this definition.
 */
export type Operation<
  P extends AnyObject = AnyObject, Q extends AnyObject = AnyObject, B extends AnyObject = AnyObject, O extends z.ZodType = z.ZodType,
  N extends string = string, M extends Method = Method,
> = {
  /** tRPC procedure name, `<resource>.<verb>` (kept as a literal type: the typed router `AppRouter` is built from it). */
  name: N;
  /** GET operations are tRPC queries, the others mutations (kept as a literal type too). */
  method: M;
  path: string;
  summary: string;
  /** Credential kinds accepted; `public` = no credential needed (one may still be sent). */
  auth: readonly CredentialKind[] | 'public';
  params?: P;
  query?: Q;
  body?: B;
  output: O;
  /** HTTP status on success (default 200). */
  status?: number;
  /** Schema base name, default the kebab-cased `name` (`keys.rotate` → `keys-rotate`). */
  schemaName?: string;
  handler: (input: z.output<P> & z.output<Q> & z.output<B>, ctx: OpContext) => Promise<z.input<O>>;
};

export function defineOperation<P extends AnyObject, Q extends AnyObject, B extends AnyObject, O extends z.ZodType, const N extends string, M extends Method>(
  op: Operation<P, Q, B, O, N, M>,
): Operation<P, Q, B, O, N, M> {
  return op;
}

export const schemaBaseName = (op: Operation) => op.schemaName ?? op.name.replace(/\./g, '-').replace(/([a-z])([A-Z])/g, '$1-$2').toLowerCase();

/** The tRPC input: params, query and body fields merged into one object (absent input reads as `{}`). */
export function combinedInput(op: Operation): z.ZodType {
  const shape = { ...(op.params?.shape ?? {}), ...(op.query?.shape ?? {}), ...(op.body?.shape ?? {}) };
  const object = op.body && isStrict(op.body) ? z.strictObject(shape) : z.object(shape);
  return z.preprocess((v) => v ?? {}, object);
}

function isStrict(schema: AnyObject): boolean {
  // zod 4 keeps the unknown-keys policy in the object's catchall: strictObject sets it to never.
  return schema.def.catchall instanceof z.ZodNever;
}

/** A bounded string of an email address (normalized later by core). */
export const emailField = z.string().trim().max(254).pipe(z.email({ message: 'must be a valid email address' }))
  .describe('Email address');
export const okSchema = z.object({ ok: z.literal(true) });
