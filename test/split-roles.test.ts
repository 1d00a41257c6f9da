import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { eq } from 'drizzle-orm';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { openDatabase, schema } from '../db/index.js';
import { createTestDatabase } from './helpers/pg.js';
import { freePort } from './helpers/ports.js';
import { apiClient, eventually } from './helpers/stack.js';

/** The documented split: `npm run start:api` and `npm run start:worker` as two processes on one PostgreSQL and Temporal. */
describe('roles in separate processes', () => {
  const children: ChildProcess[] = [];
  afterAll(() => {
    for (const c of children) c.kill('SIGKILL');
  });

  it('the API accepts work that the worker process delivers', async () => {
    const pg = await createTestDatabase();
    const port = await freePort();
    const env = {
      ...process.env,
      DATABASE_URL: pg.url,
      TEMPORAL_ADDRESS: inject('temporalAddress'),
      TEMPORAL_TASK_QUEUE: `split-${Date.now()}`,
      SECRET_KEY: 'split-secret-key-0123456789-abcdefghijklmnop',
      PORT: String(port),
      SMTP_PORT: String(await freePort()),
      DATA_DIR: mkdtempSync(join(tmpdir(), 'svc-split-')),
    };
    let output = '';
    const run = (entry: string, ...args: string[]) => {
      const c = spawn(process.execPath, ['--import', 'tsx', entry, ...args], {
        env,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      c.stderr!.on('data', (b) => (output += `[${entry}] ${b}`));
      c.stdout!.on('data', (b) => (output += `[${entry}] ${b}`));
      children.push(c);
      return c;
    };
    run('main.ts', 'api');
    run('main.ts', 'worker');
    const api = apiClient(`http://127.0.0.1:${port}`);
    await eventually(async () => (await api('GET', '/api/health')).status === 200, 60_000, 500).catch((err) => {
      throw new Error(`${(err as Error).message}\n${output}`);
    });
    const res = await api('POST', '/api/auth/signup', {
      body: { email: 'split@example.com', password: 'split roles pw' },
    });
    expect(res.status).toBe(201);
    const db = await openDatabase({ databaseUrl: pg.url, dataDir: env.DATA_DIR });
    try {
      const sent = await eventually(
        async () => {
          const [m] = await db.db.select().from(schema.messages).where(eq(schema.messages.userId, res.body.user.id));
          return m?.status === 'sent' ? m : undefined;
        },
        60_000,
        250,
      ).catch((err) => {
        throw new Error(`${(err as Error).message}\n${output}`);
      });
      expect(sent.workflowId).toMatch(/^outbound-msg_/);
    } finally {
      await db.close();
      for (const c of children) c.kill('SIGTERM');
      await new Promise((r) => setTimeout(r, 1000));
      await pg.drop();
    }
  }, 120_000);
});
