import type { Express } from 'express';
import { z } from 'zod';
import type { Core } from '../core/index.js';
import { badRequest } from '../core/errors.js';
import { operatorRoute } from './operator-route.js';

const pool = z.string().min(1).max(64).nullable();
const assignBody = z.union([
  z.strictObject({
    account_id: z.string().min(1).max(64),
    stream: z.enum(['all', 'transactional', 'bulk']).default('all'),
    pool,
  }),
  z.strictObject({ domain_id: z.string().min(1).max(64), pool }),
]);

/**
 * The operator's egress routes (Authorization: Bearer OPERATOR_TOKEN): the sources, pools and who is given
 * which (GET /api/operator/egress), and an assignment per account or per domain (POST …/assign); docs/api.md.
 */
export function mountEgressRoutes(app: Express, core: Pick<Core, 'config' | 'egressOperator'>): void {
  const off = 'Egress assignments are off: set OPERATOR_TOKEN to enable them';
  operatorRoute(
    app,
    core.config,
    { method: 'get', path: '/api/operator/egress', off, needs: 'The egress view needs' },
    () => core.egressOperator.view(),
  );
  operatorRoute(
    app,
    core.config,
    { method: 'post', path: '/api/operator/egress/assign', off, needs: 'Assigning a pool needs' },
    async (req) => {
      const parsed = assignBody.safeParse(req.body ?? {});
      if (!parsed.success)
        throw badRequest(
          'Give {account_id, stream?: all|transactional|bulk, pool: string|null} or {domain_id, pool: string|null}',
          'validation_error',
        );
      const b = parsed.data;
      return 'account_id' in b
        ? core.egressOperator.assignAccount(b.account_id, b.stream, b.pool)
        : core.egressOperator.assignDomain(b.domain_id, b.pool);
    },
  );
}
