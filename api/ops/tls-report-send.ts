import type { Express } from 'express';
import type { Core } from '../../core/index.js';
import { bearerMatches } from '../../core/secrets.js';

/**
 * POST /api/operator/tls-reports/send (operator credential: Authorization: Bearer OPERATOR_TOKEN, as the
 * other operator routes in api/deliverability.ts; not an account operation, so not in the contract): runs
 * the TLS report workflow now, the current period included, and answers what it settled
 * (docs/tls-reporting.md).
 */
export function mountTlsReportSend(app: Express, core: Pick<Core, 'config' | 'tlsReporting'>): void {
  app.post('/api/operator/tls-reports/send', async (req, res, next) => {
    const expected = core.config.operatorToken;
    if (!expected)
      return void res
        .status(404)
        .json({ error: 'Operator actions are off: set OPERATOR_TOKEN to enable them', code: 'not_found' });
    if (!bearerMatches(req.headers.authorization, expected))
      return void res
        .status(401)
        .json({ error: 'Sending TLS reports needs Authorization: Bearer <OPERATOR_TOKEN>', code: 'unauthorized' });
    try {
      res.json(await core.tlsReporting.sendNow());
    } catch (err) {
      next(err);
    }
  });
}
