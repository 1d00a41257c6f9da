import { eq, inArray } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schema } from '../db/index.js';
import { startApiProcess } from './helpers/api-process.js';
import { FROM_DOMAIN, SERVICE, startSendingStack, type SendingStack } from './helpers/sending.js';
import { eventually } from './helpers/stack.js';
import { startWorkerProcess } from './helpers/worker-process.js';

const PLANS = JSON.stringify({
  free: { includedEmails: null, dailySendCap: null, overage: 'metered', paid: true },
  capped: { includedEmails: 100_000, dailySendCap: 50, overage: 'block', paid: false },
});

let env: SendingStack;
beforeAll(async () => {
  // The API in this process; the workers are processes of their own. A slow MX (each message answered
  // 150 ms late) keeps sends in flight when one worker is stopped.
  env = await startSendingStack({ roles: ['api'], sinkDelayMs: 150, env: { PLANS } });
});
afterAll(async () => {
  await env?.stop();
});

/** What a worker process needs to share the API's database, task queue, keys and MX. */
function workerEnv(): Record<string, string> {
  const c = env.stack.config;
  return {
    DATABASE_URL: c.databaseUrl!,
    TEMPORAL_ADDRESS: env.stack.service.temporalAddress,
    TEMPORAL_TASK_QUEUE: c.temporal.taskQueue,
    SECRET_KEY: c.secretKey,
    SERVICE_DOMAIN: SERVICE,
    DATA_DIR: c.dataDir,
    NODE_ENV: 'test',
    ALLOW_PRIVATE_NETWORKS: '1',
    OUTBOUND_MODE: 'mx',
    MX_PORT: String(env.sink.port),
    DNS_SERVERS: env.dns.server.address,
    OUTBOUND_RETRY_SCHEDULE: '500,500',
    PLANS,
    PORT: '0',
    SMTP_PORT: '0',
    IMAP_PORT: '0',
    IMAPS_PORT: '0',
    SUBMISSION_PORT: '0',
    SUBMISSIONS_PORT: '0',
  };
}

describe('roles scaled out', () => {
  it('SIGTERM to one of two workers under load: it drains, the other takes over, every message reaches the MX exactly once', async () => {
    const a = await startWorkerProcess(workerEnv());
    const b = await startWorkerProcess(workerEnv());
    try {
      const N = 200;
      const sends = await Promise.all(
        Array.from({ length: 4 }, (_, k) =>
          env.stack.api('POST', '/v1/send/batch', {
            token: env.key,
            body: {
              from: `hello@${FROM_DOMAIN}`,
              subject: 'scale-out',
              text: 'x',
              recipients: Array.from({ length: N / 4 }, (_, i) => ({ to: `so-${k}-${i}@rcpt.test` })),
            },
          }),
        ),
      );
      const ids = sends.flatMap((r) => {
        expect(r.status).toBe(200);
        return r.body.results.map((x: any) => x.id as string);
      });
      expect(ids).toHaveLength(N);
      const mine = () => env.sink.received.filter((m) => m.to.some((t) => t.startsWith('so-')));

      // Under load: some delivered, most still to go.
      await eventually(async () => mine().length >= 10, 60_000, 20);
      const exited = new Promise<number | null>((resolve) => a.child.once('exit', (code) => resolve(code)));
      a.child.kill('SIGTERM');
      expect(mine().length).toBeLessThan(N);
      expect(await exited).toBe(0);
      expect(a.output()).toContain('SIGTERM: shutting down');

      const rows = await eventually(
        async () => {
          const r = await env.stack.service.core.db
            .select({ id: schema.messages.id, status: schema.messages.status })
            .from(schema.messages)
            .where(inArray(schema.messages.id, ids));
          return r.length === N && r.every((m) => m.status === 'sent') ? r : undefined;
        },
        120_000,
        250,
      );
      expect(rows).toHaveLength(N);
      // Exactly once at the MX: N messages, N distinct recipients, none twice.
      const to = mine().flatMap((m) => m.to);
      expect(to).toHaveLength(N);
      expect(new Set(to).size).toBe(N);
    } finally {
      await a.kill();
      await b.kill();
    }
  }, 240_000);

  it('the failed sign-in limit holds across two API processes (its window is in PostgreSQL)', async () => {
    await env.stack.api('POST', '/api/auth/signup', {
      body: { email: 'guessed@example.com', password: 'the real password' },
    });
    const second = await startApiProcess(env.stack, { PLANS });
    try {
      const wrong = (i: number) =>
        (i % 2 ? second.api : env.stack.api)('POST', '/api/auth/login', {
          body: { email: 'guessed@example.com', password: `guess ${i}` },
        });
      // Ten wrong guesses, five through each process: each one is answered 401.
      for (let i = 0; i < 10; i++) expect((await wrong(i)).status).toBe(401);
      // The eleventh is refused by either process, and so is the right password, until the window passes.
      expect(await wrong(10)).toMatchObject({ status: 429, body: { code: 'rate_limited' } });
      expect(await wrong(11)).toMatchObject({ status: 429, body: { code: 'rate_limited' } });
      const right = await second.api('POST', '/api/auth/login', {
        body: { email: 'guessed@example.com', password: 'the real password' },
      });
      expect(right.status).toBe(429);
    } finally {
      await second.stop();
    }
  }, 120_000);

  it('a daily send cap holds across two API processes taking sends at once', async () => {
    const s = (
      await env.stack.api('POST', '/api/auth/signup', {
        body: { email: 'capped@example.com', password: 'capped plan pw' },
      })
    ).body;
    await env.stack.service.core.db
      .update(schema.users)
      .set({ emailVerified: true, plan: 'capped' })
      .where(eq(schema.users.id, s.user.id));
    await env.stack.api('POST', '/api/domains/subdomain', { token: s.token, body: { subdomain: 'capped' } });
    const key = (await env.stack.api('GET', '/api/keys', { token: s.token })).body.key as string;
    const second = await startApiProcess(env.stack, { PLANS });
    try {
      const send = (api: typeof env.stack.api, i: number) =>
        api('POST', '/v1/send', {
          token: key,
          body: { from: `c@capped.${SERVICE}`, to: `cap-${i}@rcpt.test`, subject: 's', text: 't' },
        });
      const answers = await Promise.all(
        Array.from({ length: 80 }, (_, i) => send(i % 2 ? second.api : env.stack.api, i)),
      );
      expect(answers.filter((r) => r.status === 200)).toHaveLength(50);
      expect(answers.filter((r) => r.status === 429)).toHaveLength(30);
      expect(answers.filter((r) => r.status === 429).every((r) => r.body.code === 'daily_limit')).toBe(true);
      // Both processes took some of the 50.
      expect(answers.filter((r, i) => r.status === 200 && i % 2 === 1).length).toBeGreaterThan(0);
      expect(answers.filter((r, i) => r.status === 200 && i % 2 === 0).length).toBeGreaterThan(0);
    } finally {
      await second.stop();
    }
  }, 120_000);
});
