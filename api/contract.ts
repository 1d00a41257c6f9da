import { z } from 'zod';
import type { Actor, CredentialKind, Principal } from '../core/tenancy.js';
import { IDEMPOTENCY_KEY_MAX, IDEMPOTENCY_KEY_PATTERN } from '../core/idempotency.js';
import type { Core } from '../core/index.js';

/** The version of SPEC.md this API implements (OpenAPI `info.version`); schemas only grow within it (test/schema-compat.test.ts). */
export const CONTRACT_VERSION = '0.19.0';

export type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyObject = z.ZodObject<any>;

/**
 * How an operation appears as a tool of the MCP server at /mcp (api/mcp): set = exposed. The hints are
 * MCP ToolAnnotations; unset ones follow the method (GET read-only, DELETE destructive, GET/PUT/DELETE idempotent).
 */
export type McpToolMeta = {
  /** Tool name; default the operation name in snake case (`lists.addContacts` → `lists_add_contacts`). */
  name?: string;
  title: string;
  readOnly?: boolean;
  destructive?: boolean;
  idempotent?: boolean;
  /** Reaches beyond the account (mail to the world, webhook posts): openWorldHint. Default false. */
  openWorld?: boolean;
};

/** Who may call an operation: the credential kinds accepted, or `public` (no credential needed; one may still be sent). */
export type OpAuth = readonly CredentialKind[] | 'public';

/** What every handler receives besides its input: core services and the request's origin. */
type BaseContext = { core: Core; clientIp: string };

/**
 * The context of an operation that takes a credential: who acts (built once with `actorOf` where the
 * credential is resolved) and the credential itself, narrowed to the kinds the operation accepts (for the
 * few that need more than the actor: a mailbox scope, an OAuth grant).
 */
export type AuthedContext<K extends CredentialKind = CredentialKind> = BaseContext & {
  actor: Actor;
  principal: Extract<Principal, { kind: K }>;
};

/** The context of a `public` operation: no actor (REST and tRPC pass no credential to it either). */
export type PublicContext = BaseContext & { principal?: Principal };

/** What a handler receives besides its input, by its `auth`: a credential list gives an actor, `public` none. */
export type ContextOf<A extends OpAuth> = A extends readonly (infer K extends CredentialKind)[]
  ? AuthedContext<K>
  : PublicContext;

/** The context of any operation (what transports build and pass on). */
export type OpContext = AuthedContext | PublicContext;

/**
 * One operation, defined once: its REST route (method + SPEC.md path), its tRPC procedure (`name`),
 * and the JSON Schemas of its request and response all come from this definition.
 */
export type Operation<
  P extends AnyObject = AnyObject,
  Q extends AnyObject = AnyObject,
  B extends AnyObject = AnyObject,
  O extends z.ZodType = z.ZodType,
  N extends string = string,
  M extends Method = Method,
  K extends boolean | undefined = boolean | undefined,
  A extends OpAuth = OpAuth,
> = {
  /** tRPC procedure name, `<resource>.<verb>` (kept as a literal type: the typed router `AppRouter` is built from it). */
  name: N;
  /** GET operations are tRPC queries, the others mutations (kept as a literal type too). */
  method: M;
  path: string;
  summary: string;
  /** Credential kinds accepted; `public` = no credential needed (one may still be sent). */
  auth: A;
  params?: P;
  query?: Q;
  body?: B;
  output: O;
  /** HTTP status on success (default 200). */
  status?: number;
  /** Schema base name, default the kebab-cased `name` (`keys.rotate` → `keys-rotate`). */
  schemaName?: string;
  /** A POST that creates or sends: takes an idempotency key (REST header `Idempotency-Key`, tRPC and MCP field `idempotencyKey`). */
  idempotencyKey?: K;
  /** Exposed as an MCP tool (api/mcp) when set. */
  mcp?: McpToolMeta;
  /**
   * The operation itself. A method signature on purpose: its context parameter is then compared both ways,
   * so an operation of one `auth` is also an `Operation` (transports pass it the context its `auth` gets).
   */
  handler(input: z.output<P> & z.output<Q> & z.output<B>, ctx: ContextOf<A>): Promise<z.input<O>>;
};

export function defineOperation<
  P extends AnyObject,
  Q extends AnyObject,
  B extends AnyObject,
  O extends z.ZodType,
  const N extends string,
  M extends Method,
  const K extends boolean | undefined = undefined,
  const A extends OpAuth = OpAuth,
>(op: Operation<P, Q, B, O, N, M, K, A>): Operation<P, Q, B, O, N, M, K, A> {
  return op;
}

export const schemaBaseName = (op: Operation) =>
  op.schemaName ??
  op.name
    .replace(/\./g, '-')
    .replace(/([a-z])([A-Z])/g, '$1-$2')
    .toLowerCase();

/** An idempotency key as an input field (tRPC, MCP); REST takes the same value in the `Idempotency-Key` header. */
export const idempotencyKeyField = z
  .string()
  .min(1)
  .max(IDEMPOTENCY_KEY_MAX)
  .regex(IDEMPOTENCY_KEY_PATTERN, 'must be printable ASCII without spaces')
  .describe(
    'Makes a retry safe: the same key with the same request within 24 hours answers the first result again and does nothing else (1-255 printable ASCII characters, e.g. a UUID)',
  );

/** The fields of params, query and body as one object (plus `idempotencyKey` where the operation takes one): the tRPC and MCP input. */
export function combinedObject(op: Operation): AnyObject {
  const shape = {
    ...(op.params?.shape ?? {}),
    ...(op.query?.shape ?? {}),
    ...(op.body?.shape ?? {}),
    ...(op.idempotencyKey ? { idempotencyKey: idempotencyKeyField.optional() } : {}),
  };
  return op.body && isStrict(op.body) ? z.strictObject(shape) : z.object(shape);
}

/** The tRPC input: params, query and body fields merged into one object (absent input reads as `{}`). */
export function combinedInput(op: Operation): z.ZodType {
  return z.preprocess((v) => v ?? {}, combinedObject(op));
}

function isStrict(schema: AnyObject): boolean {
  // zod 4 keeps the unknown-keys policy in the object's catchall: strictObject sets it to never.
  return schema.def.catchall instanceof z.ZodNever;
}

/** A bounded string of an email address (normalized later by core). */
export const emailField = z
  .string()
  .trim()
  .max(254)
  .pipe(z.email({ message: 'must be a valid email address' }))
  .describe('Email address');
export const okSchema = z.object({ ok: z.literal(true) });
