import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { serveMetrics } from '../api/metrics.js';

/** METRICS_PORT: GET /metrics for the roles without the API (smtp, imap, worker); anything else is 404. */
export async function startMetricsServer(
  port: number,
  operatorToken: string | undefined,
): Promise<{ port: number; close(): Promise<void> }> {
  const server: Server = createServer((req, res) => {
    if (req.method !== 'GET' || (req.url ?? '').split('?')[0] !== '/metrics') {
      res.statusCode = 404;
      res.setHeader('content-type', 'application/json');
      return void res.end(JSON.stringify({ error: 'Only GET /metrics is served here', code: 'not_found' }));
    }
    void serveMetrics(operatorToken, req.headers.authorization, res);
  });
  server.requestTimeout = 10_000;
  server.listen(port, '0.0.0.0');
  await new Promise<void>((resolve, reject) => server.once('listening', resolve).once('error', reject));
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
