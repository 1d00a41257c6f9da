import type { Request } from 'express';
import { badRequest } from '../core/errors.js';
import { fingerprintOf, type IdempotentAnswer, type StoredAnswer } from '../core/idempotency.js';
import type { Actor } from '../core/tenancy.js';
import { idempotencyKeyField, type Operation, type OpContext } from './contract.js';
import { outputOf } from './output.js';

/** The request header (IETF draft-ietf-httpapi-idempotency-key-header) and the header a replayed answer carries. */
export const IDEMPOTENCY_HEADER = 'Idempotency-Key';
export const REPLAYED_HEADER = 'Idempotent-Replayed';

/** The key of a REST request: the header, checked like the input field (400 `invalid_idempotency_key`). */
export function headerKey(req: Request): string | undefined {
  const raw = req.get(IDEMPOTENCY_HEADER);
  if (raw === undefined) return undefined;
  const parsed = idempotencyKeyField.safeParse(raw);
  if (!parsed.success)
    throw badRequest(
      `${IDEMPOTENCY_HEADER}: ${parsed.error.issues[0]?.message ?? 'invalid'} (1-255 printable ASCII characters)`,
      'invalid_idempotency_key',
    );
  return parsed.data;
}

/** tRPC and MCP carry the key as the `idempotencyKey` input field: the handler gets the input without it. */
export function splitKeyField(input: unknown): { input: Record<string, unknown>; key: string | undefined } {
  const { idempotencyKey, ...rest } = (input ?? {}) as Record<string, unknown>;
  return { input: rest, key: typeof idempotencyKey === 'string' ? idempotencyKey : undefined };
}

/** What a keyed request is: the operation, the credential's domain scope (a scoped key never replays the account's answers) and the input. */
export const requestFingerprint = (operation: string, actor: Actor, input: unknown) =>
  fingerprintOf({ operation, domain: actor.domainId ?? null, input });

/**
 * Calls an operation's handler for any transport. With a key on an operation that takes one, the call
 * runs once per (account, key): a repeat answers the kept status and body (`replayed`) and runs nothing.
 * A key on an operation that takes none is ignored (GETs, updates and deletes are safe to repeat).
 * The answer is always parsed with the output schema (api/output.ts); `strictOutput` (outside
 * production) also fails an answer that carries a field the schema does not declare.
 */
export async function runOperation(
  op: Operation,
  input: Record<string, unknown>,
  ctx: OpContext,
  opts: { key?: string; strictOutput: boolean },
): Promise<IdempotentAnswer> {
  const call = async (): Promise<StoredAnswer> => {
    const result = await op.handler(input as never, ctx);
    return {
      status: op.status ?? 200,
      body: outputOf(op.output, result, { strict: opts.strictOutput, operation: op.name }),
    };
  };
  const actor = 'actor' in ctx ? ctx.actor : undefined;
  if (opts.key === undefined || !op.idempotencyKey || !actor) return { ...(await call()), replayed: false };
  const answer = await ctx.core.idempotency.run(
    { userId: actor.userId, key: opts.key, operation: op.name, fingerprint: requestFingerprint(op.name, actor, input) },
    call,
  );
  // A replay is parsed again, not strictly: it may have been kept by an older version with other fields.
  return answer.replayed
    ? { ...answer, body: outputOf(op.output, answer.body, { strict: false, operation: op.name }) }
    : answer;
}
