import type { Express, Response } from 'express';
import { z } from 'zod';
import type { Core } from '../core/index.js';
import { failures } from '../core/operator/checks.js';
import { log } from '../core/log.js';
import { bearerMatches } from '../core/secrets.js';
import type { SchemaEntry } from './schemas.js';

/** What the health routes call: the health service, the service domain's records, the operator token. */
type HealthDeps = Pick<Core, 'config' | 'health' | 'serviceDomain'>;

export const healthSchema: SchemaEntry = {
  name: 'health-response',
  title: 'GET /api/health response body',
  io: 'output',
  schema: z.object({
    ok: z.boolean().describe('true when the database and Temporal are both reachable'),
    database: z.object({
      ok: z.boolean(),
      kind: z.enum(['postgres', 'pglite']),
      error: z.string().optional().describe('why it failed: only with Authorization: Bearer OPERATOR_TOKEN'),
    }),
    temporal: z.object({
      ok: z.boolean(),
      error: z.string().optional().describe('why it failed: only with Authorization: Bearer OPERATOR_TOKEN'),
    }),
  }),
};

export const healthDetailSchema: SchemaEntry = {
  name: 'health-detail-response',
  title: 'GET /api/health?detail=1 response body (Authorization: Bearer OPERATOR_TOKEN)',
  io: 'output',
  schema: z.object({
    ok: z.boolean().describe('true when no required check failed (warnings and skipped checks do not count)'),
    failed: z.array(z.string()).describe('ids of the required checks that failed'),
    checks: z
      .array(
        z.object({
          id: z.string(),
          status: z.enum(['ok', 'warn', 'fail', 'skipped']),
          required: z.boolean(),
          what: z.string(),
          detail: z.string(),
          fix: z.string().optional().describe('what to do about it, when not ok'),
        }),
      )
      .describe('the checks of `npm run doctor`, one per line there'),
    records: z
      .array(z.object({ type: z.string(), name: z.string(), value: z.string(), priority: z.number().optional() }))
      .describe('the DNS records SERVICE_DOMAIN needs (served by the built-in DNS server when DNS_PORT is set)'),
  }),
};

async function probe(fn: () => Promise<void>, timeoutMs = 2000): Promise<{ ok: boolean; error?: string }> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      fn(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error('timed out')), timeoutMs);
      }),
    ]);
    return { ok: true };
  } catch (err) {
    return { ok: false, error: (err as Error).message };
  } finally {
    clearTimeout(timer);
  }
}

/**
 * GET /api/health: 200 `{ok: true, …}` when healthy, 503 with the failing part otherwise. The public
 * answer says only ok or not per component: a raw error names hosts, ports and driver messages. Those go
 * to the log, and to the operator's own request (`Authorization: Bearer OPERATOR_TOKEN`).
 */
export function mountHealth(app: Express, core: HealthDeps): void {
  app.get('/api/health', async (req, res) => {
    if (req.query.detail !== undefined && req.query.detail !== '0')
      return void (await detail(core, req.headers.authorization, res));
    const [database, temporal] = await Promise.all([
      probe(() => core.health.pingDatabase()),
      probe(() => core.health.pingTemporal()),
    ]);
    const ok = database.ok && temporal.ok;
    if (!ok) log.warn({ database: database.error, temporal: temporal.error }, 'health check failed');
    const token = core.config.operatorToken;
    const operator = token ? bearerMatches(req.headers.authorization, token) : false;
    const shown = (p: { ok: boolean; error?: string }) => (operator ? p : { ok: p.ok });
    res
      .status(ok ? 200 : 503)
      .json({ ok, database: { ...shown(database), kind: core.health.databaseKind }, temporal: shown(temporal) });
  });
}

/** The doctor over HTTP, for the operator credential only: it names hosts, addresses and configuration. */
async function detail(core: HealthDeps, authorization: string | undefined, res: Response): Promise<void> {
  const expected = core.config.operatorToken;
  if (!expected)
    return void res
      .status(404)
      .json({ error: 'Detailed health is off: set OPERATOR_TOKEN to enable it', code: 'not_found' });
  if (!bearerMatches(authorization, expected))
    return void res
      .status(401)
      .json({ error: 'Detailed health needs Authorization: Bearer <OPERATOR_TOKEN>', code: 'unauthorized' });
  const checks = await core.health.doctor();
  const records = await core.serviceDomain.records().catch(() => []);
  const failed = failures(checks).map((c) => c.id);
  res.status(failed.length ? 503 : 200).json({ ok: failed.length === 0, failed, checks, records });
}
