import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { eq } from 'drizzle-orm';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { openDatabase, schema } from '../db/index.js';
import { startTestDns } from './helpers/dns.js';
import { createTestDatabase } from './helpers/pg.js';
import { freePort } from './helpers/ports.js';
import { startRoleProcess } from './helpers/role-process.js';
import { startSmtpSink } from './helpers/smtp-sink.js';
import { apiClient, eventually } from './helpers/stack.js';

const SERVICE = 'logs.svc.test';
const PASSWORD = 'logs password never logged';

/** The API and worker roles as one child process: every line it writes is JSON, carries ids, and no credential. */
describe('structured logs', () => {
  const cleanups: (() => Promise<unknown>)[] = [];
  afterAll(async () => {
    for (const fn of cleanups.reverse()) await fn().catch(() => undefined);
  });

  it('a send through the API and the worker logs JSON lines with level, role and ids, never the API key', async () => {
    const pg = await createTestDatabase();
    cleanups.push(() => pg.drop());
    const sink = await startSmtpSink();
    cleanups.push(() => sink.close());
    const dns = await startTestDns();
    cleanups.push(() => dns.close());
    dns.zone.set('rcpt.test', 'MX', [{ value: 'sink.rcpt.test', priority: 10 }]);
    dns.zone.set('sink.rcpt.test', 'A', [{ value: '127.0.0.1' }]);
    const port = await freePort();
    const roles = await startRoleProcess(
      ['api', 'worker'],
      {
        DATABASE_URL: pg.url,
        TEMPORAL_ADDRESS: inject('temporalAddress'),
        TEMPORAL_TASK_QUEUE: `logs-${Date.now()}`,
        SECRET_KEY: 'logs-secret-key-0123456789-abcdefghijklmnop',
        PORT: String(port),
        DATA_DIR: mkdtempSync(join(tmpdir(), 'svc-logs-')),
        SERVICE_DOMAIN: SERVICE,
        OUTBOUND_MODE: 'mx',
        MX_PORT: String(sink.port),
        DNS_SERVERS: dns.server.address,
        DNS_PORT: String(await freePort()),
        ALLOW_PRIVATE_NETWORKS: '1',
        NODE_ENV: 'test',
        LOG_LEVEL: 'info',
      },
      '[api] listening',
    );
    cleanups.push(() => roles.stop());

    const api = apiClient(`http://127.0.0.1:${port}`);
    const session = (await api('POST', '/api/auth/signup', { body: { email: 'logs@example.com', password: PASSWORD } }))
      .body;
    const db = await openDatabase({ databaseUrl: pg.url, dataDir: tmpdir() });
    await db.db.update(schema.users).set({ emailVerified: true }).where(eq(schema.users.id, session.user.id));
    await db.close();
    const domain = (await api('POST', '/api/domains/subdomain', { token: session.token, body: { subdomain: 'acme' } }))
      .body.domain;
    const key: string = (await api('GET', '/api/keys', { token: session.token })).body.key;
    const sent = await api('POST', '/v1/send', {
      token: key,
      body: { from: `hello@acme.${SERVICE}`, to: 'ann@rcpt.test', subject: 'Hi', text: 'Hello' },
    });
    expect(sent.status).toBe(200);
    const messageId: string = sent.body.id;
    // A refused call with the key in its header: nothing of it may reach the log either.
    expect(
      (
        await api('POST', '/v1/send', {
          token: key,
          body: { from: 'nobody@elsewhere.example', to: 'x@rcpt.test', subject: 'x', text: 'x' },
        })
      ).status,
    ).toBeGreaterThanOrEqual(400);
    await sink.waitFor((r) => r.to.includes('ann@rcpt.test'));
    await eventually(
      async () => roles.output().includes('"smtp transaction"') && roles.output().includes(messageId),
      20_000,
    );
    expect(await roles.stop()).toBe(0);

    const lines = roles.lines();
    const parsed = lines.map((line) => {
      try {
        return JSON.parse(line) as Record<string, unknown>;
      } catch {
        throw new Error(`not a JSON log line: ${line}`);
      }
    });
    for (const l of parsed) {
      expect(l).toMatchObject({
        level: expect.stringMatching(/^(debug|info|warn|error)$/),
        role: 'api+worker',
        time: expect.any(String),
      });
    }
    const accepted = parsed.find((l) => l.msg === 'message accepted' && l.messageId === messageId);
    expect(accepted).toMatchObject({ accountId: session.user.id, domainId: domain.id });
    const transaction = parsed.find((l) => l.msg === 'smtp transaction' && l.messageId === messageId);
    expect(transaction).toMatchObject({
      accountId: session.user.id,
      domainId: domain.id,
      result: 'sent',
      workflowId: expect.stringMatching(/^outbound-/),
      runId: expect.any(String),
      activity: 'sendQueuedMessages',
    });
    expect(roles.output()).not.toContain(key);
    expect(roles.output()).not.toContain(PASSWORD);
    expect(roles.output()).not.toContain(session.token);
  }, 120_000);
});

describe('redaction', () => {
  it('replaces values under secret keys at the top level, one level down and in headers, without changing the caller’s object', async () => {
    const { redactSecrets } = await import('../core/log.js');
    const line = {
      messageId: 'msg_1',
      token: 't0p',
      nested: { password: 'pw', keep: 'ok', deeper: { token: 'left as is (two levels down)' } },
      req: { headers: { authorization: 'Bearer abc', cookie: 'c=1', accept: '*/*' } },
      headers: { 'set-cookie': 's=1' },
      list: [{ token: 'arrays are not walked' }],
    };
    const before = structuredClone(line);
    const out = redactSecrets(line) as typeof line;
    expect(out).toEqual({
      messageId: 'msg_1',
      token: '[redacted]',
      nested: { password: '[redacted]', keep: 'ok', deeper: { token: 'left as is (two levels down)' } },
      req: { headers: { authorization: '[redacted]', cookie: '[redacted]', accept: '*/*' } },
      headers: { 'set-cookie': '[redacted]' },
      list: [{ token: 'arrays are not walked' }],
    });
    expect(line).toEqual(before);
    const plain = { messageId: 'msg_2', to: 1 };
    expect(redactSecrets(plain)).toBe(plain);
  });

  it('the process logger applies it to every line, scope ids included', async () => {
    const { spawnSync } = await import('node:child_process');
    const script =
      "import { log, withLogScope } from './core/log.ts'; withLogScope({ accountId: 'usr_1', token: 'scoped-secret' }, () => log.info({ apiKey: 'svc_live_secret', body: { password: 'hunter2' } }, 'x'));";
    const r = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      cwd: join(import.meta.dirname, '..'),
      env: { ...process.env, LOG_LEVEL: 'info' },
      encoding: 'utf8',
    });
    const line = JSON.parse(r.stdout.trim().split('\n').pop()!);
    expect(line).toMatchObject({
      accountId: 'usr_1',
      token: '[redacted]',
      apiKey: '[redacted]',
      body: { password: '[redacted]' },
      msg: 'x',
    });
    expect(r.stdout).not.toMatch(/scoped-secret|svc_live_secret|hunter2/);
  });
});
