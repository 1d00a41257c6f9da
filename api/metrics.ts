import type { Express, Request, Response } from 'express';
import type { Core } from '../core/index.js';
import { registry } from '../core/metrics.js';
import { bearerMatches } from '../core/secrets.js';

/**
 * GET /metrics on the API port, which is published: only for `Authorization: Bearer OPERATOR_TOKEN`, and
 * 404 when no OPERATOR_TOKEN is set. Without a token, scrape METRICS_PORT, which stays on the private network.
 */
export function mountMetrics(app: Express, core: Pick<Core, 'config'>): void {
  app.get('/metrics', (req: Request, res: Response) => {
    if (core.config.operatorToken) return void serveMetrics(core.config.operatorToken, req.headers.authorization, res);
    res.status(404).json({
      error: 'Metrics are not served on the API port without OPERATOR_TOKEN: set it, or scrape METRICS_PORT',
      code: 'not_found',
    });
  });
}

/** Writes the exposition (or the 401) to an express or plain node response. */
export async function serveMetrics(
  operatorToken: string | undefined,
  authorization: string | undefined,
  res: { statusCode: number; setHeader(n: string, v: string): unknown; end(b: string): unknown },
): Promise<void> {
  if (!metricsAllowed(operatorToken, authorization)) {
    res.statusCode = 401;
    res.setHeader('content-type', 'application/json');
    res.setHeader('www-authenticate', 'Bearer');
    return void res.end(
      JSON.stringify({ error: 'Metrics need Authorization: Bearer <OPERATOR_TOKEN>', code: 'unauthorized' }),
    );
  }
  try {
    const body = await registry.metrics();
    res.statusCode = 200;
    res.setHeader('content-type', registry.contentType);
    res.end(body);
  } catch {
    res.statusCode = 503;
    res.setHeader('content-type', 'application/json');
    res.end(
      JSON.stringify({ error: 'Metrics could not be collected (the database did not answer)', code: 'unavailable' }),
    );
  }
}

/** Whether a scrape may read the metrics: always without OPERATOR_TOKEN, else only with `Bearer <token>`. */
export function metricsAllowed(operatorToken: string | undefined, authorization: string | undefined): boolean {
  return !operatorToken || bearerMatches(authorization, operatorToken);
}
