import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { inject } from 'vitest';
import { loadConfig, type Config } from '../../core/config.js';
import { configureLogging, type LogLevel } from '../../core/log.js';
import { ALL_ROLES, startService, type Role, type Service } from '../../runtime/service.js';
import { dropSchedules, recordHistories } from './histories.js';
import { createTestDatabase } from './pg.js';
import { freePort } from './ports.js';

// Worker logs at WARN: the INFO lines of every worker start would bury test output. The service's own log too (LOG_LEVEL overrides).
configureLogging({ level: (process.env.LOG_LEVEL as LogLevel | undefined) ?? 'warn', role: 'test' });
try {
  Runtime.install({ logger: new DefaultLogger('WARN') });
} catch {
  /* installed already in this process */
}

export type TestStack = {
  service: Service;
  config: Config;
  baseUrl: string;
  api: ApiClient;
  stop(): Promise<void>;
};

/**
 * The whole service against real peers: a fresh PostgreSQL database, the shared Temporal dev server
 * (own task queue), a worker, the API and SMTP on free loopback ports.
 */
export async function startStack(env: Record<string, string> = {}, roles: Role[] = ALL_ROLES): Promise<TestStack> {
  const database = await createTestDatabase();
  const dataDir = mkdtempSync(join(tmpdir(), 'svc-data-'));
  const port = await freePort();
  const config = loadConfig({
    PORT: String(port),
    SMTP_PORT: String(await freePort()),
    IMAP_PORT: '0',
    IMAPS_PORT: '0',
    SUBMISSION_PORT: '0',
    SUBMISSIONS_PORT: '0',
    DATA_DIR: dataDir,
    DATABASE_URL: database.url,
    TEMPORAL_ADDRESS: inject('temporalAddress'),
    TEMPORAL_TASK_QUEUE: `test-${Math.random().toString(36).slice(2, 10)}`,
    SECRET_KEY: 'test-secret-key-0123456789-abcdefghijklmnop',
    NODE_ENV: 'test',
    SIGNUP_LIMIT_PER_HOUR: '1000',
    // Test peers (webhook receivers, SMTP sinks) listen on loopback: the development setting lets outbound reach them.
    ALLOW_PRIVATE_NETWORKS: '1',
    // Test accounts are mostly unverified and receive more than the production daily allowance; the
    // storage-door test sets it low to test it.
    UNVERIFIED_INBOUND_DAILY: '1000000',
    UNVERIFIED_INBOUND_DAILY_BYTES: String(64 * 1024 ** 3),
    ...env,
  });
  const service = await startService(config, roles, {
    workflowBundle: { codePath: inject('workflowBundlePath') },
    log: () => undefined,
  });
  const baseUrl = `http://127.0.0.1:${service.apiPort ?? port}`;
  return {
    service,
    config,
    baseUrl,
    api: apiClient(baseUrl),
    async stop() {
      await recordHistories(service.temporalAddress, config.temporal.taskQueue).catch((err) =>
        console.warn('[histories]', (err as Error).message),
      );
      await service.stop();
      await dropSchedules(service.temporalAddress, config.temporal.taskQueue).catch((err) =>
        console.warn('[schedules]', (err as Error).message),
      );
      await database.drop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

export type ApiResponse<T = any> = { status: number; body: T; headers: Headers };
export type ApiClient = (
  method: string,
  path: string,
  opts?: { token?: string; body?: unknown; raw?: string; headers?: Record<string, string> },
) => Promise<ApiResponse>;

/** A tiny fetch wrapper: JSON in, JSON (or text) out, Bearer credential when given. */
export function apiClient(baseUrl: string): ApiClient {
  return async (method, path, opts = {}) => {
    const headers: Record<string, string> = { ...opts.headers };
    if (opts.token) headers.authorization = `Bearer ${opts.token}`;
    let body: string | undefined = opts.raw;
    if (opts.body !== undefined) {
      headers['content-type'] ??= 'application/json';
      body = JSON.stringify(opts.body);
    } else if (opts.raw !== undefined) headers['content-type'] ??= 'application/json';
    const res = await fetch(baseUrl + path, { method, headers, body });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      /* not JSON: keep the text */
    }
    return { status: res.status, body: parsed as any, headers: res.headers };
  };
}

/** Polls `fn` until it returns a truthy value (for work that a workflow finishes asynchronously). */
export async function eventually<T>(
  fn: () => Promise<T | undefined | null | false>,
  timeoutMs = 15_000,
  everyMs = 100,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline)
      throw new Error(`condition not met within ${timeoutMs} ms${last ? `: ${(last as Error).message}` : ''}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
