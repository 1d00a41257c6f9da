/**
 * Type-level checks of AppRouter, run by `npm run typecheck` (tsc -p dashboard): if the router's types
 * ever widened to `any`, the dashboard's type-check would pass vacuously; these lines would then fail.
 * Nothing here runs in the browser (this module is imported by no page).
 */
import type { Inputs, Outputs } from './api.js';

type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
const assert = <T extends true>(_: T) => undefined;

// Outputs are the operations' zod output types.
assert<Equal<Outputs['keys']['rotate'], { key: string }>>(true);
assert<Equal<Outputs['webhooks']['test'], { ok: boolean; status: number }>>(true);
assert<Equal<Outputs['messages']['list'][number]['direction'], 'outbound' | 'inbound'>>(true);
// Inputs merge params, query and body; an operation without required fields may be called without input.
assert<Equal<Inputs['webhooks']['test'], { id: string; idempotencyKey?: string }>>(true);
// An operation that takes an idempotency key has it as an optional field; one that does not, has none.
assert<Equal<Inputs['send']['single']['idempotencyKey'], string | undefined>>(true);
assert<Equal<'idempotencyKey' extends keyof Inputs['domains']['verify'] ? true : false, false>>(true);
assert<Equal<Inputs['keys']['get'], void | Record<never, never>>>(true);

// @ts-expect-error a required body field is missing
export const missingField: Inputs['auth']['signup'] = { email: 'a@example.com' };
// @ts-expect-error an unknown procedure
export type NoSuchProcedure = Outputs['keys']['nope'];
export const wrongOutput: Outputs['domains']['delete'] = {
  ok: true,
  // @ts-expect-error an output field of the wrong type
  cleanup: { deregistered: [], dnsDeleted: '0', warnings: [] },
};
