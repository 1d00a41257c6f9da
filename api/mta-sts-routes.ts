import type { Express } from 'express';
import type { Core } from '../core/index.js';
import { operatorRoute } from './operator-route.js';

/**
 * The operator's view of recipient domains' MTA-STS policies (docs/mta-sts.md), Authorization: Bearer
 * OPERATOR_TOKEN: GET /api/operator/mta-sts/:domain answers the stored row (404 when none), POST
 * /api/operator/mta-sts/:domain/flush forgets it so the next message fetches the policy again.
 */
export function mountMtaStsRoutes(app: Express, core: Pick<Core, 'config' | 'mtaSts'>): void {
  const off = 'Operator actions are off: set OPERATOR_TOKEN to enable them';
  operatorRoute(
    app,
    core.config,
    { method: 'get', path: '/api/operator/mta-sts/:domain', off, needs: "Reading a domain's MTA-STS policy needs" },
    (req) => core.mtaSts.show(String(req.params.domain)),
  );
  operatorRoute(
    app,
    core.config,
    {
      method: 'post',
      path: '/api/operator/mta-sts/:domain/flush',
      off,
      needs: "Flushing a domain's MTA-STS policy needs",
    },
    (req) => core.mtaSts.flush(String(req.params.domain)),
  );
}
