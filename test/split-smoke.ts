// The main flows against a running split deployment (scripts/split-smoke.sh starts one on fresh databases):
// sign up and verify the email, a custom and a hosted domain, a delivered send, an inbound message to a
// webhook, a scheduled send cancelled. Exits non-zero naming the step that failed.
import { Connection } from '@temporalio/client';
import { connect } from 'node:net';
import nodemailer from 'nodemailer';
import { connectTemporal } from '../temporal/client.js';
import { prepareSearchAttributes, probeQuery } from '../temporal/search-attribute-setup.js';
import { tokenFromMail } from './helpers/outbox.js';
import { apiClient, eventually, type ApiResponse } from './helpers/stack.js';
import { everySearchAttribute, freshNamespace } from './helpers/search-attributes.js';
import { startWebhookReceiver } from './helpers/webhook-receiver.js';

const env = (name: string) => process.env[name] ?? fail(`${name} is not set`);
const API = env('SMOKE_API_URL');
const SMTP_PORT = Number(env('SMOKE_SMTP_PORT'));
const SERVICE_DOMAIN = env('SMOKE_SERVICE_DOMAIN');
const TEMPORAL_ADDRESS = env('SMOKE_TEMPORAL_ADDRESS');
const SPLIT_PID = Number(process.env.SMOKE_SPLIT_PID ?? 0);
/** The second API process and SMTP ingress, when the deployment runs two of each (split-smoke.sh does). */
const API2 = process.env.SMOKE_API_URL2;
const SMTP_PORT2 = process.env.SMOKE_SMTP_PORT2 ? Number(process.env.SMOKE_SMTP_PORT2) : undefined;
/** The submission processes' STARTTLS ports (split-smoke.sh runs two: the base port and the next). */
const SUBMISSION_PORTS = (process.env.SMOKE_SUBMISSION_PORTS ?? '').split(',').filter(Boolean).map(Number);
const READY_MS = Number(process.env.SMOKE_READY_TIMEOUT_MS ?? 240_000);

/** Whether something accepts a TCP connection on 127.0.0.1:port. */
function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

function fail(message: string): never {
  throw new Error(message);
}

/** Throws with the response in the message unless `res` has the expected status. */
function expectStatus(res: ApiResponse, status: number, what: string): ApiResponse {
  if (res.status !== status) fail(`${what}: expected HTTP ${status}, got ${res.status} ${JSON.stringify(res.body)}`);
  return res;
}

async function step<T>(name: string, fn: () => Promise<T>): Promise<T> {
  const started = Date.now();
  try {
    const out = await fn();
    console.log(`split-smoke: ok   ${name} (${Date.now() - started} ms)`);
    return out;
  } catch (err) {
    throw new Error(`step "${name}" failed: ${messages(err)}`, { cause: err });
  }
}

const api = apiClient(API);
const hooks = await startWebhookReceiver();
try {
  await step('the roles serve (GET /api/health)', () =>
    eventually(
      async () => {
        if (SPLIT_PID && !isAlive(SPLIT_PID)) fail('scripts/split-deployment.sh exited before the API answered');
        return (
          (await api('GET', '/api/health')).status === 200 &&
          (!API2 || (await apiClient(API2)('GET', '/api/health')).status === 200)
        );
      },
      READY_MS,
      500,
    ),
  );
  // Each role starts on its own; on a loaded machine an ingress can come up seconds after the APIs (each
  // process prepares the search attributes and the service domain's key first): wait for every one.
  await step(SMTP_PORT2 ? 'both SMTP ingresses accept connections' : 'the SMTP role accepts connections', () =>
    eventually(
      async () => {
        if (SPLIT_PID && !isAlive(SPLIT_PID)) fail('scripts/split-deployment.sh exited before the SMTP roles listened');
        return (await accepts(SMTP_PORT)) && (!SMTP_PORT2 || (await accepts(SMTP_PORT2)));
      },
      READY_MS,
      500,
    ),
  );

  // The roles serve only once the server resolves every search attribute (issue 9: the first request failed).
  await step('the moment the API serves, a query naming every search attribute succeeds', async () => {
    const connection = await Connection.connect({ address: TEMPORAL_ADDRESS });
    try {
      await connection.workflowService.listWorkflowExecutions({
        namespace: 'default',
        pageSize: 1,
        query: probeQuery(),
      });
    } finally {
      await connection.close();
    }
  });

  const firstSession = await step('sign up', async () => {
    const up = expectStatus(
      await api('POST', '/api/auth/signup', { body: { email: 'smoke@example.com', password: 'smoke test password' } }),
      201,
      'POST /api/auth/signup',
    );
    return up.body.token as string;
  });

  // Right after the roles serve, as a newcomer would: the first workflow start that carries search attributes.
  await step('POST /api/domains (a custom domain: starts its verification workflow)', async () => {
    const res = expectStatus(
      await api('POST', '/api/domains', { token: firstSession, body: { domain: 'smoke-custom.example' } }),
      201,
      'POST /api/domains',
    );
    if (res.body.domain?.status !== 'pending')
      fail(`expected a pending domain, got ${JSON.stringify(res.body.domain)}`);
  });

  // The mailed sign-in link proves the address too: it verifies it here and answers a session to go on with.
  const session = await step(
    'the verification mail is captured by the worker; a mailed sign-in link verifies the email and signs in',
    async () => {
      const mailTo = async (subject: RegExp) =>
        eventually(
          async () => {
            const box = expectStatus(await api('GET', '/api/outbox', { token: firstSession }), 200, 'GET /api/outbox');
            return (box.body as { to: string[]; subject: string | null; raw: string }[]).find(
              (m) => m.to.includes('smoke@example.com') && subject.test(m.subject ?? ''),
            );
          },
          60_000,
          250,
        );
      await mailTo(/Verify/);
      expectStatus(
        await api('POST', '/api/auth/signin-link', { body: { email: 'smoke@example.com' } }),
        200,
        'POST /api/auth/signin-link',
      );
      const link = await mailTo(/[Ss]ign/);
      const signed = expectStatus(
        await api('POST', '/api/auth/signin', { body: { token: tokenFromMail(link.raw) } }),
        200,
        'POST /api/auth/signin',
      );
      if (signed.body.user?.emailVerified !== true) fail(`sign-in answered ${JSON.stringify(signed.body)}`);
      return signed.body.token as string;
    },
  );

  const hosted = `smoke.${SERVICE_DOMAIN}`;
  const domainId = await step(`claim the hosted subdomain ${hosted}`, async () => {
    const res = expectStatus(
      await api('POST', '/api/domains/subdomain', { token: session, body: { subdomain: 'smoke' } }),
      201,
      'POST /api/domains/subdomain',
    );
    if (res.body.domain?.status !== 'verified')
      fail(`expected a verified domain, got ${JSON.stringify(res.body.domain)}`);
    return res.body.domain.id as string;
  });

  const key: string = expectStatus(await api('GET', '/api/keys', { token: session }), 200, 'GET /api/keys').body.key;
  const send = (body: Record<string, unknown>) =>
    api('POST', '/v1/send', {
      token: key,
      body: { from: `Smoke <hello@${hosted}>`, subject: 'Smoke', text: 'Hello from the smoke test', ...body },
    });

  await step('a send is delivered (captured by the worker, message sent)', async () => {
    const res = expectStatus(await send({ to: 'rcpt@example.org' }), 200, 'POST /v1/send');
    const id: string = res.body.id;
    await eventually(
      async () => {
        const msg = expectStatus(
          await api('GET', `/api/messages/${id}`, { token: session }),
          200,
          `GET /api/messages/${id}`,
        );
        return msg.body.message.status === 'sent';
      },
      60_000,
      250,
    );
    const box = expectStatus(await api('GET', '/api/outbox', { token: session }), 200, 'GET /api/outbox');
    if (!(box.body as { id: string }[]).some((m) => m.id === id)) fail(`message ${id} is sent but not in the outbox`);
  });

  for (const port of SUBMISSION_PORTS) {
    await step(
      `a message submitted over SMTP (submission role on ${port}, STARTTLS, the account key) is delivered`,
      async () => {
        await eventually(async () => (await accepts(port)) || undefined, READY_MS, 250);
        const smtp = nodemailer.createTransport({
          host: '127.0.0.1',
          port,
          secure: false,
          requireTLS: true,
          auth: { user: 'smoke', pass: key },
          tls: { rejectUnauthorized: false },
        });
        const info = await smtp.sendMail({
          from: `hello@${hosted}`,
          to: 'submitted@example.org',
          subject: 'Smoke',
          text: 'x',
        });
        smtp.close();
        const id = /queued as (msg_[\w-]+)/.exec(info.response)?.[1] ?? fail(`unexpected answer ${info.response}`);
        await eventually(
          async () =>
            expectStatus(await api('GET', `/api/messages/${id}`, { token: session }), 200, `GET /api/messages/${id}`)
              .body.message.status === 'sent',
          60_000,
          250,
        );
      },
    );
  }

  await step('inbound mail through the SMTP role reaches the webhook, signed', async () => {
    const set = expectStatus(
      await api('PUT', `/api/domains/${domainId}/webhook`, { token: session, body: { url: `${hooks.base}/inbound` } }),
      200,
      'PUT webhook',
    );
    hooks.secret('/inbound', set.body.signingSecret);
    const smtp = nodemailer.createTransport({ host: '127.0.0.1', port: SMTP_PORT, secure: false, ignoreTLS: true });
    await smtp.sendMail({
      from: 'alice@sender.example',
      to: `inbox@${hosted}`,
      subject: 'Smoke inbound',
      text: 'Inbound body',
    });
    smtp.close();
    const [hit] = await hooks.waitFor('/inbound', 1, 60_000);
    if (!hit!.verified) fail('the webhook signature does not verify');
    if (hit!.json?.type !== 'email.received' || hit!.json?.subject !== 'Smoke inbound')
      fail(`unexpected payload ${hit!.body.slice(0, 300)}`);
  });

  if (API2) {
    await step('the second API process serves the same account: a send through it is delivered', async () => {
      const api2 = apiClient(API2);
      const res = expectStatus(
        await api2('POST', '/v1/send', {
          token: key,
          body: {
            from: `Smoke <hello@${hosted}>`,
            to: 'second@example.org',
            subject: 'Smoke 2',
            text: 'Through API 2',
          },
        }),
        200,
        'POST /v1/send (API 2)',
      );
      await eventually(
        async () =>
          expectStatus(
            await api('GET', `/api/messages/${res.body.id}`, { token: session }),
            200,
            'GET /api/messages/:id',
          ).body.message.status === 'sent',
        60_000,
        250,
      );
    });
  }
  if (SMTP_PORT2) {
    await step('inbound mail through the second SMTP ingress reaches the webhook', async () => {
      const smtp = nodemailer.createTransport({ host: '127.0.0.1', port: SMTP_PORT2, secure: false, ignoreTLS: true });
      await smtp.sendMail({
        from: 'bob@sender.example',
        to: `inbox@${hosted}`,
        subject: 'Smoke inbound 2',
        text: 'Inbound body 2',
      });
      smtp.close();
      const hits = await hooks.waitFor('/inbound', 2, 60_000);
      if (!hits.some((h) => h.verified && h.json?.subject === 'Smoke inbound 2'))
        fail('no signed delivery of the message sent to the second ingress');
    });
  }

  await step('a scheduled send is cancelled and never sent', async () => {
    const res = expectStatus(
      await send({ to: 'later@example.org', scheduledAt: 'in 1 hour' }),
      200,
      'POST /v1/send (scheduled)',
    );
    if (res.body.status !== 'scheduled') fail(`expected status scheduled, got ${JSON.stringify(res.body)}`);
    const cancel = expectStatus(
      await api('DELETE', `/v1/scheduled/${res.body.id}`, { token: key }),
      200,
      'DELETE /v1/scheduled/:id',
    );
    if (cancel.body.status !== 'canceled') fail(`cancel answered ${JSON.stringify(cancel.body)}`);
    const row = expectStatus(
      await api('GET', `/v1/scheduled/${res.body.id}`, { token: key }),
      200,
      'GET /v1/scheduled/:id',
    );
    if (row.body.status !== 'canceled') fail(`the scheduled send reads ${JSON.stringify(row.body)}`);
  });
  // The setup itself on this server, where the mapping lags the registration: once it returns, a run carrying
  // every attribute starts at the first try (the window the roles used to serve in).
  await step(
    'search-attribute setup on a fresh namespace of this server: a run carrying every attribute starts at once',
    async () => {
      const namespace = await freshNamespace(TEMPORAL_ADDRESS);
      const t = await connectTemporal({ address: TEMPORAL_ADDRESS, namespace, taskQueue: 'smoke-none' });
      try {
        await prepareSearchAttributes(t, { database: { withLock: (_id, fn) => fn() }, address: TEMPORAL_ADDRESS });
        const handle = await t.client.workflow.start('noSuchWorkflow', {
          taskQueue: 'smoke-none',
          workflowId: 'carries-all',
          typedSearchAttributes: everySearchAttribute(),
        });
        await handle.terminate('smoke test');
      } finally {
        await t.connection.close();
      }
    },
  );
  console.log('split-smoke: all flows passed');
} catch (err) {
  console.error(`split-smoke: FAILED: ${(err as Error).message}`);
  process.exitCode = 1;
} finally {
  await hooks.close();
}

/** An error's message with its causes' (a failed workflow start says why only in its cause). */
function messages(err: unknown): string {
  const parts: string[] = [];
  for (let e = err as Error | undefined; e && parts.length < 5; e = e.cause as Error | undefined) parts.push(e.message);
  return parts.join(': ');
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
