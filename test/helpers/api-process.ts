import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './ports.js';
import { apiClient, type ApiClient, type TestStack } from './stack.js';

/**
 * A second API process (`npm run start:api`, i.e. `main.ts api`) on the same PostgreSQL, Temporal task
 * queue and SECRET_KEY as `stack`: what a load balancer in front of two API replicas sees.
 */
export async function startApiProcess(
  stack: TestStack,
  env: Record<string, string> = {},
): Promise<{ baseUrl: string; api: ApiClient; output: () => string; stop(): Promise<void> }> {
  const c = stack.config;
  const port = await freePort();
  const dataDir = mkdtempSync(join(tmpdir(), 'svc-api2-'));
  const child = spawn(process.execPath, ['--import', 'tsx', 'main.ts', 'api'], {
    env: {
      ...process.env,
      DATABASE_URL: c.databaseUrl!,
      TEMPORAL_ADDRESS: stack.service.temporalAddress,
      TEMPORAL_TASK_QUEUE: c.temporal.taskQueue,
      SECRET_KEY: c.secretKey,
      SERVICE_DOMAIN: c.serviceDomain,
      PORT: String(port),
      SMTP_PORT: String(await freePort()),
      DATA_DIR: dataDir,
      NODE_ENV: 'test',
      ALLOW_PRIVATE_NETWORKS: '1',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    const onData = (b: Buffer) => {
      out += b.toString();
      if (out.includes('[api] listening')) resolve();
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`API process exited (${code}):\n${out}`)));
  });
  const baseUrl = `http://127.0.0.1:${port}`;
  return {
    baseUrl,
    api: apiClient(baseUrl),
    output: () => out,
    async stop() {
      child.kill('SIGTERM');
      await exited;
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
