import type { Express, Request } from 'express';
import { requireKind } from '../core/auth.js';
import { actorOf, type Principal } from '../core/tenancy.js';
import type { Core } from '../core/index.js';
import type { ContextOf, OpAuth, Operation, OpContext } from './contract.js';
import { validationError } from './errors.js';
import { headerKey, REPLAYED_HEADER, runOperation } from './idempotency.js';

/** Mounts each operation at its SPEC.md path: validate params, query and body; authenticate; call; answer. */
export function mountRest(app: Express, ops: readonly Operation[], core: Core, opts: { strictOutput: boolean }): void {
  for (const op of ops) {
    const route = app.route(op.path);
    const method = op.method.toLowerCase() as 'get' | 'post' | 'put' | 'patch' | 'delete';
    route[method](async (req, res) => {
      const ctx = await contextFor(op, req, core);
      const input = parseInput(op, req);
      const answer = await runOperation(op, input, ctx, { key: headerKey(req), strictOutput: opts.strictOutput });
      if (answer.replayed) res.set(REPLAYED_HEADER, 'true');
      res.status(answer.status).json(answer.body);
    });
  }
}

function parseInput(op: Operation, req: Request): Record<string, unknown> {
  const parts: Record<string, unknown>[] = [];
  for (const [where, schema, value] of [
    ['params', op.params, req.params],
    ['query', op.query, req.query],
    ['body', op.body, req.body ?? {}],
  ] as const) {
    if (!schema) continue;
    const parsed = schema.safeParse(value);
    if (!parsed.success) throw validationError(parsed.error.issues, where === 'body' ? undefined : where);
    parts.push(parsed.data as Record<string, unknown>);
  }
  return Object.assign({}, ...parts);
}

/** Credentials checked before the body was read (`authenticateEarly`), so the operation does not check them twice. */
const early = new WeakMap<Request, { authorization: string; principal: Principal | undefined }>();

/**
 * Checks the request's credential before a large body is read (api/body-limits.ts): throws the 401 (or
 * 403) at once, so nothing of the body is parsed for a stranger; keeps the principal for `contextFor`.
 * App passwords are not looked at here: no route with a large body takes them.
 */
export async function authenticateEarly(req: Request, core: Pick<Core, 'auth'>): Promise<void> {
  const authorization = req.get('authorization') ?? '';
  early.set(req, { authorization, principal: await core.auth.authenticate(authorization, { ip: clientIpOf(req) }) });
}

const clientIpOf = (req: Request) => req.ip ?? req.socket.remoteAddress ?? '';

/**
 * The context of one call of `op`: for an operation that takes a credential, the credential checked
 * against its kinds and the actor built from it (here, once); for a `public` one, no actor.
 */
export async function contextFor<A extends OpAuth>(op: { auth: A }, req: Request, core: Core): Promise<ContextOf<A>> {
  return (await resolveContext(op, req, core)) as ContextOf<A>;
}

async function resolveContext(op: { auth: OpAuth }, req: Request, core: Core): Promise<OpContext> {
  const clientIp = clientIpOf(req);
  if (op.auth === 'public') return { core, clientIp };
  const appPasswords = op.auth.includes('app_password');
  const checked = early.get(req);
  const found =
    checked && !appPasswords && checked.authorization === (req.get('authorization') ?? '')
      ? checked.principal
      : await core.auth.authenticate(req.get('authorization'), { appPasswords, ip: clientIp });
  const principal = requireKind(found, op.auth);
  return { core, principal, actor: actorOf(principal), clientIp };
}
