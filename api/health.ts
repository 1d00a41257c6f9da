import type { Express } from 'express';
import { z } from 'zod';
import type { Core } from '../core/index.js';
import type { SchemaEntry } from './schemas.js';

export const healthSchema: SchemaEntry = {
  name: 'health-response', title: 'GET /api/health response body', io: 'output',
  schema: z.object({
    ok: z.boolean().describe('true when the database and Temporal are both reachable'),
    database: z.object({ ok: z.boolean(), kind: z.enum(['postgres', 'pglite']), error: z.string().optional() }),
    temporal: z.object({ ok: z.boolean(), error: z.string().optional() }),
  }),
};

async function probe(fn: () => Promise<void>, timeoutMs = 2000): Promise<{ ok: boolean; error?: string }> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([fn(), new Promise((_, reject) => { timer = setTimeout(() => reject(new Error('timed out')), timeoutMs); })]);
    return { ok: true };
  } catch (err) {
    return { ok: false, error: (err as Error).message };
  } finally {
    clearTimeout(timer);
  }
}

/** GET /api/health: 200 `{ok: true, …}` when healthy, 503 with the failing part otherwise. */
export function mountHealth(app: Express, core: Core): void {
  app.get('/api/health', async (_req, res) => {
    const [database, temporal] = await Promise.all([probe(() => core.database.ping()), probe(() => core.workflows.ping())]);
    const ok = database.ok && temporal.ok;
    res.status(ok ? 200 : 503).json({ ok, database: { ...database, kind: core.database.kind }, temporal });
  });
}
