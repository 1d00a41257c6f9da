import type { Express } from 'express';
import type { Core } from '../core/index.js';
import { badRequest } from '../core/errors.js';
import { operatorRoute } from './operator-route.js';

/** The most hours the operator's outcomes route sums (90 days). */
const MAX_HOURS = 90 * 24;

/**
 * GET /api/operator/egress/outcomes?hours=24 (operator credential): delivery outcomes per egress source and
 * pool over every account, system mail included, for the last `hours` whole hours (docs/operations.md).
 */
export function mountEgressOutcomes(app: Express, core: Pick<Core, 'config' | 'egressOutcomes'>): void {
  operatorRoute(
    app,
    core.config,
    {
      method: 'get',
      path: '/api/operator/egress/outcomes',
      off: 'Deliverability reports are off: set OPERATOR_TOKEN to enable them',
      needs: 'Egress outcomes need',
    },
    async (req) => {
      const raw = req.query.hours ?? '24';
      const hours = typeof raw === 'string' && /^\d{1,5}$/.test(raw) ? Number(raw) : NaN;
      if (!(hours >= 1 && hours <= MAX_HOURS))
        throw badRequest(`hours must be a whole number from 1 to ${MAX_HOURS}`, 'validation_error');
      return core.egressOutcomes.overall(hours);
    },
  );
}
