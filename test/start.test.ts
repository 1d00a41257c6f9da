import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { isListening } from '../temporal/dev-server.js';
import { freePort } from './helpers/ports.js';
import { apiClient, eventually } from './helpers/stack.js';

/** `npm start` as a newcomer runs it: embedded PGlite, the Temporal dev server with its UI, all roles. */
async function start(env: Record<string, string>): Promise<{ child: ChildProcess; output: () => string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'main.ts'], {
    env: { ...process.env, ...env, DATABASE_URL: '', TEMPORAL_ADDRESS: '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (b) => (out += b));
  child.stderr!.on('data', (b) => (out += b));
  return { child, output: () => out };
}

const exited = (child: ChildProcess) => new Promise<number | null>((r) => child.once('exit', (code) => r(code)));

describe('npm start', () => {
  const children: ChildProcess[] = [];
  afterAll(() => {
    for (const c of children) c.kill('SIGKILL');
  });

  it('serves health and the Temporal UI, stops everything on SIGTERM, and keeps data across a restart', async () => {
    const env = {
      PORT: String(await freePort()),
      SMTP_PORT: String(await freePort()),
      IMAP_PORT: String(await freePort()),
      IMAPS_PORT: String(await freePort()),
      SUBMISSION_PORT: String(await freePort()),
      SUBMISSIONS_PORT: String(await freePort()),
      TEMPORAL_DEV_PORT: String(await freePort()),
      TEMPORAL_UI_PORT: String(await freePort()),
      DATA_DIR: mkdtempSync(join(tmpdir(), 'svc-start-')),
    };
    const api = apiClient(`http://127.0.0.1:${env.PORT}`);
    const first = await start(env);
    children.push(first.child);
    const health = await eventually(
      async () => {
        const r = await api('GET', '/api/health');
        return r.status === 200 ? r : undefined;
      },
      90_000,
      500,
    ).catch((err) => {
      throw new Error(`${err.message}\n${first.output()}`);
    });
    expect(health.body).toMatchObject({ ok: true, database: { ok: true, kind: 'pglite' }, temporal: { ok: true } });
    const ui = await fetch(`http://127.0.0.1:${env.TEMPORAL_UI_PORT}/`);
    expect(ui.status).toBe(200);
    expect(await ui.text()).toContain('<html');
    const signup = await api('POST', '/api/auth/signup', {
      body: { email: 'restart@example.com', password: 'survives restarts' },
    });
    expect(signup.status).toBe(201);
    // Every role serves: SMTP ingress, submission on both ports, IMAP.
    for (const port of ['SMTP_PORT', 'SUBMISSION_PORT', 'SUBMISSIONS_PORT', 'IMAP_PORT'] as const)
      expect(await isListening(Number(env[port])), port).toBe(true);

    // No RSPAMD_URL: the SMTP role runs a local rspamd (installed here as on CI) and stops it with the rest.
    const rspamdPort = /\[rspamd\] local rspamd scoring inbound mail on http:\/\/127\.0\.0\.1:(\d+)/.exec(
      first.output(),
    );
    expect(rspamdPort, first.output().slice(-3000)).not.toBeNull();
    expect(await isListening(Number(rspamdPort![1]))).toBe(true);

    first.child.kill('SIGTERM');
    const code = await exited(first.child);
    expect(code, first.output().slice(-3000)).toBe(0);
    await eventually(async () => !(await isListening(Number(rspamdPort![1]))), 30_000, 200);
    expect(await isListening(Number(env.TEMPORAL_DEV_PORT))).toBe(false);
    expect(await isListening(Number(env.PORT))).toBe(false);
    expect(await isListening(Number(env.SUBMISSION_PORT))).toBe(false);

    const second = await start(env);
    children.push(second.child);
    await eventually(async () => (await api('GET', '/api/health')).status === 200, 90_000, 500);
    const login = await api('POST', '/api/auth/login', {
      body: { email: 'restart@example.com', password: 'survives restarts' },
    });
    expect(login.status).toBe(200);
    second.child.kill('SIGTERM');
    expect(await exited(second.child)).toBe(0);
  }, 240_000);
});
