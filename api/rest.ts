import type { Express, Request } from 'express';
import { requireKind } from '../core/auth.js';
import type { Core } from '../core/index.js';
import type { Operation, OpContext } from './contract.js';
import { validationError } from './errors.js';

/** Mounts each operation at its SPEC.md path: validate params, query and body; authenticate; call; answer. */
export function mountRest(app: Express, ops: readonly Operation[], core: Core, opts: { checkOutput: boolean }): void {
  for (const op of ops) {
    const route = app.route(op.path);
    const method = op.method.toLowerCase() as 'get' | 'post' | 'put' | 'patch' | 'delete';
    route[method](async (req, res) => {
      const ctx = await contextFor(op, req, core);
      const input = parseInput(op, req);
      const result = await op.handler(input as never, ctx);
      const body = opts.checkOutput ? op.output.parse(result) : result;
      res.status(op.status ?? 200).json(body);
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

export async function contextFor(op: Operation, req: Request, core: Core): Promise<OpContext> {
  const clientIp = req.ip ?? req.socket.remoteAddress ?? '';
  if (op.auth === 'public') return { core, principal: undefined, clientIp };
  const principal = await core.auth.authenticate(req.get('authorization'), { appPasswords: op.auth.includes('app_password'), ip: clientIp });
  return { core, principal: requireKind(principal, op.auth), clientIp };
}
