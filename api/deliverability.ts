import type { Express } from 'express';
import type { Core } from '../core/index.js';
import { operatorRoute } from './operator-route.js';

/** What the operator's deliverability routes call. */
type DeliverabilityDeps = Pick<Core, 'config' | 'dkimRotation' | 'shaping' | 'feedbackGuard' | 'tlsReporting'>;

/** The operator's routes (Authorization: Bearer OPERATOR_TOKEN, as /api/health?detail=1), below. */
export function mountDeliverability(app: Express, core: DeliverabilityDeps): void {
  const actionsOff = 'Operator actions are off: set OPERATOR_TOKEN to enable them';
  /**
   * POST /api/service-domain/dkim/rotate (operator credential): rotates SERVICE_DOMAIN's own DKIM key,
   * the one that signs system mail, through the rotation workflow `dkim-rotate-service` (docs/domains.md).
   */
  operatorRoute(
    app,
    core.config,
    {
      method: 'post',
      path: '/api/service-domain/dkim/rotate',
      off: actionsOff,
      needs: "Rotating the service domain's key needs",
    },
    () => core.dkimRotation.requestService(),
  );

  /**
   * POST /api/operator/domains/:id/resume-sending (operator credential): resumes any domain's bulk mail the
   * complaint guard paused, as the owner's POST /api/domains/:id/resume-sending does (docs/deliverability.md).
   */
  operatorRoute(
    app,
    core.config,
    {
      method: 'post',
      path: '/api/operator/domains/:id/resume-sending',
      off: actionsOff,
      needs: 'Resuming a domain needs',
    },
    (req) => core.feedbackGuard.resumeAsOperator(String(req.params.id)),
  );

  /**
   * POST /api/operator/tls-reports/send (operator credential): runs the TLS report workflow now, the current
   * period included, and answers what it settled (docs/tls-reporting.md).
   */
  operatorRoute(
    app,
    core.config,
    { method: 'post', path: '/api/operator/tls-reports/send', off: actionsOff, needs: 'Sending TLS reports needs' },
    () => core.tlsReporting.sendNow(),
  );

  /**
   * GET /api/deliverability/sites: destination sites, their limits in force, open connections, suspensions
   * and their causes, and the latest automation actions (docs/deliverability.md).
   */
  operatorRoute(
    app,
    core.config,
    {
      method: 'get',
      path: '/api/deliverability/sites',
      off: 'Deliverability reports are off: set OPERATOR_TOKEN to enable them',
      needs: 'Deliverability reports need',
    },
    async () => ({ shapingFile: core.config.shaping.file, ...(await core.shaping.report()) }),
  );
}
