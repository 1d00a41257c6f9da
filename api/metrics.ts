import type { Express, Request, Response } from 'express';
import type { Core } from '../core/index.js';
import { metricsAllowed, registry } from '../core/metrics.js';

/** GET /metrics: the process's Prometheus metrics; with OPERATOR_TOKEN set, only for `Authorization: Bearer <token>`. */
export function mountMetrics(app: Express, core: Core): void {
  app.get('/metrics', (req: Request, res: Response) => void serveMetrics(core.config.operatorToken, req.headers.authorization, res));
}

/** Writes the exposition (or the 401) to an express or plain node response. */
export async function serveMetrics(operatorToken: string | undefined, authorization: string | undefined, res: { statusCode: number; setHeader(n: string, v: string): unknown; end(b: string): unknown }): Promise<void> {
  if (!metricsAllowed(operatorToken, authorization)) {
    res.statusCode = 401;
    res.setHeader('content-type', 'application/json');
    res.setHeader('www-authenticate', 'Bearer');
    return void res.end(JSON.stringify({ error: 'Metrics need Authorization: Bearer <OPERATOR_TOKEN>', code: 'unauthorized' }));
  }
  try {
    const body = await registry.metrics();
    res.statusCode = 200;
    res.setHeader('content-type', registry.contentType);
    res.end(body);
  } catch {
    res.statusCode = 503;
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ error: 'Metrics could not be collected (the database did not answer)', code: 'unavailable' }));
  }
}
