import { spawn, type ChildProcess } from 'node:child_process';
import { inject } from 'vitest';
import type { TestStack } from './stack.js';

/**
 * `npm run start:worker` as its own process, so a test can kill it as a crash would (SIGKILL) and
 * start another. Resolves once it polls its task queue; reuses the run's workflow bundle.
 */
export async function startWorkerProcess(
  env: Record<string, string>,
): Promise<{ child: ChildProcess; output: () => string; kill(): Promise<void> }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'main.ts', 'worker'], {
    env: { ...process.env, ...env, SVC_WORKFLOW_BUNDLE: inject('workflowBundlePath') },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    const onData = (b: Buffer) => {
      out += b.toString();
      if (out.includes('[worker] polling')) resolve();
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`worker exited (${code}):\n${out}`)));
  });
  return {
    child,
    output: () => out,
    async kill() {
      child.kill('SIGKILL');
      await exited;
    },
  };
}

/**
 * The environment of a worker process that joins `stack` (its database, Temporal task queue, secret and
 * data directory) and listens on no port, with `env` (the stack's own settings, a test CA…) under it.
 */
export function workerEnvOf(stack: TestStack, env: Record<string, string> = {}): Record<string, string> {
  const c = stack.config;
  return {
    ...env,
    DATABASE_URL: c.databaseUrl!,
    TEMPORAL_ADDRESS: stack.service.temporalAddress,
    TEMPORAL_TASK_QUEUE: c.temporal.taskQueue,
    SECRET_KEY: c.secretKey,
    DATA_DIR: c.dataDir,
    NODE_ENV: 'test',
    PORT: '0',
    SMTP_PORT: '0',
    IMAP_PORT: '0',
    IMAPS_PORT: '0',
    SUBMISSION_PORT: '0',
    SUBMISSIONS_PORT: '0',
  };
}
