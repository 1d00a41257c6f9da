import type { Express } from 'express';
import type { Core } from '../core/index.js';
import { bearerMatches } from '../core/secrets.js';

/** What the operator's deliverability routes call. */
type DeliverabilityDeps = Pick<Core, 'config' | 'dkimRotation' | 'shaping' | 'feedbackGuard'>;

/**
 * GET /api/deliverability/sites (operator credential: Authorization: Bearer OPERATOR_TOKEN, as
 * /api/health?detail=1): destination sites, their limits in force, open connections, suspensions and
 * their causes, and the latest automation actions (docs/deliverability.md).
 */
export function mountDeliverability(app: Express, core: DeliverabilityDeps): void {
  /**
   * POST /api/service-domain/dkim/rotate (operator credential): rotates SERVICE_DOMAIN's own DKIM key,
   * the one that signs system mail, through the rotation workflow `dkim-rotate-service` (docs/domains.md).
   */
  app.post('/api/service-domain/dkim/rotate', async (req, res, next) => {
    const expected = core.config.operatorToken;
    if (!expected)
      return void res
        .status(404)
        .json({ error: 'Operator actions are off: set OPERATOR_TOKEN to enable them', code: 'not_found' });
    if (!bearerMatches(req.headers.authorization, expected))
      return void res.status(401).json({
        error: "Rotating the service domain's key needs Authorization: Bearer <OPERATOR_TOKEN>",
        code: 'unauthorized',
      });
    try {
      res.json(await core.dkimRotation.requestService());
    } catch (err) {
      next(err);
    }
  });

  /**
   * POST /api/operator/domains/:id/resume-sending (operator credential): resumes any domain's bulk mail the
   * complaint guard paused, as the owner's POST /api/domains/:id/resume-sending does (docs/deliverability.md).
   */
  app.post('/api/operator/domains/:id/resume-sending', async (req, res, next) => {
    const expected = core.config.operatorToken;
    if (!expected)
      return void res
        .status(404)
        .json({ error: 'Operator actions are off: set OPERATOR_TOKEN to enable them', code: 'not_found' });
    if (!bearerMatches(req.headers.authorization, expected))
      return void res
        .status(401)
        .json({ error: 'Resuming a domain needs Authorization: Bearer <OPERATOR_TOKEN>', code: 'unauthorized' });
    try {
      res.json(await core.feedbackGuard.resumeAsOperator(String(req.params.id)));
    } catch (err) {
      next(err);
    }
  });

  app.get('/api/deliverability/sites', async (req, res, next) => {
    const expected = core.config.operatorToken;
    if (!expected)
      return void res
        .status(404)
        .json({ error: 'Deliverability reports are off: set OPERATOR_TOKEN to enable them', code: 'not_found' });
    if (!bearerMatches(req.headers.authorization, expected))
      return void res
        .status(401)
        .json({ error: 'Deliverability reports need Authorization: Bearer <OPERATOR_TOKEN>', code: 'unauthorized' });
    try {
      res.json({ shapingFile: core.config.shaping.file, ...(await core.shaping.report()) });
    } catch (err) {
      next(err);
    }
  });
}
