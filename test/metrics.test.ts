import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import nodemailer from 'nodemailer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { metric, scrape, type Scrape } from './helpers/metrics.js';
import { freePort } from './helpers/ports.js';
import { FROM_DOMAIN, startSendingStack, type SendingStack } from './helpers/sending.js';
import { eventually } from './helpers/stack.js';
import { startWebhookReceiver } from './helpers/webhook-receiver.js';
import { startWorkerProcess } from './helpers/worker-process.js';

const TOKEN = 'operator-token-0123456789-metrics';
const N = 3; // API sends, one recipient at rcpt.test each: its site is its MX host set, sink.rcpt.test
const M = 2; // inbound SMTP messages, each POSTed once to the domain's webhook

/** The API and SMTP roles in this process; the worker a process of its own with METRICS_PORT and TEMPORAL_METRICS_PORT. */
describe('Prometheus metrics', () => {
  let s: SendingStack;
  let hooks: Awaited<ReturnType<typeof startWebhookReceiver>>;
  let worker: Awaited<ReturnType<typeof startWorkerProcess>>;
  let workerMetrics: string;
  let temporalMetrics: string;

  beforeAll(async () => {
    hooks = await startWebhookReceiver();
    s = await startSendingStack({ env: { OPERATOR_TOKEN: TOKEN }, roles: ['api', 'smtp'] });
    const c = s.stack.config;
    const [metricsPort, temporalPort] = [await freePort(), await freePort()];
    worker = await startWorkerProcess({
      DATABASE_URL: c.databaseUrl!,
      TEMPORAL_ADDRESS: s.stack.service.temporalAddress,
      TEMPORAL_TASK_QUEUE: c.temporal.taskQueue,
      SECRET_KEY: c.secretKey,
      SERVICE_DOMAIN: c.serviceDomain,
      OUTBOUND_MODE: 'mx',
      MX_PORT: String(c.mxPort),
      DNS_SERVERS: c.dnsServers.join(','),
      ALLOW_PRIVATE_NETWORKS: '1',
      NODE_ENV: 'test',
      DATA_DIR: mkdtempSync(join(tmpdir(), 'svc-metrics-')),
      OPERATOR_TOKEN: TOKEN,
      METRICS_PORT: String(metricsPort),
      TEMPORAL_METRICS_PORT: String(temporalPort),
      OUTBOUND_RETRY_SCHEDULE: '500,500',
    });
    workerMetrics = `http://127.0.0.1:${metricsPort}/metrics`;
    temporalMetrics = `http://127.0.0.1:${temporalPort}/metrics`;
  }, 120_000);
  afterAll(async () => {
    await worker?.kill();
    await s?.stop();
    await hooks?.close();
  });

  it('refuses a scrape without the operator token, on the API and on METRICS_PORT', async () => {
    for (const url of [`${s.stack.baseUrl}/metrics`, workerMetrics]) {
      const none = await fetch(url);
      expect(none.status).toBe(401);
      expect(await none.json()).toMatchObject({ code: 'unauthorized' });
      expect((await fetch(url, { headers: { authorization: 'Bearer not-the-operator-token-at-all' } })).status).toBe(
        401,
      );
      expect((await fetch(url, { headers: { authorization: `Bearer ${TOKEN}` } })).status).toBe(200);
    }
  });

  it('counters move by exactly the traffic sent: N sends, M inbound messages, M webhook POSTs', async () => {
    const domains = (await s.stack.api('GET', '/api/domains', { token: s.session })).body as {
      id: string;
      domain: string;
    }[];
    const domain = domains.find((d) => d.domain === FROM_DOMAIN)!;
    const set = await s.stack.api('PUT', `/api/domains/${domain.id}/webhook`, {
      token: s.session,
      body: { url: `${hooks.base}/in`, ackMode: 'lenient' },
    });
    expect(set.status).toBe(200);
    hooks.secret('/in', set.body.signingSecret);
    const api = () => scrape(`${s.stack.baseUrl}/metrics`, TOKEN);
    const wrk = () => scrape(workerMetrics, TOKEN);
    const [api0, wrk0] = [await api(), await wrk()];

    for (let i = 0; i < N; i++) expect((await s.send({ to: `user${i}@rcpt.test` })).status).toBe(200);
    const smtp = nodemailer.createTransport({
      host: '127.0.0.1',
      port: s.stack.service.smtpPort!,
      secure: false,
      ignoreTLS: true,
    });
    for (let i = 0; i < M; i++)
      await smtp.sendMail({
        from: 'alice@sender.example',
        to: `in${i}@${FROM_DOMAIN}`,
        subject: `in ${i}`,
        text: 'hello',
      });
    await hooks.waitFor('/in', M);

    const delta = (a: Scrape, b: Scrape, name: string, labels?: Record<string, string>) =>
      metric(b, name, labels) - metric(a, name, labels);
    // The worker counts an outcome once its transaction is recorded: wait until the deliveries are counted, then check exact totals.
    const wrk1 = await eventually(async () => {
      const now = await wrk();
      return delta(wrk0, now, 'svc_recipient_outcomes_total', { site: 'sink.rcpt.test' }) >= N &&
        delta(wrk0, now, 'svc_webhook_attempts_total') >= M
        ? now
        : undefined;
    }, 30_000);
    const api1 = await api();
    expect(delta(api0, api1, 'svc_messages_accepted_total', { source: 'api' })).toBe(N);
    expect(delta(api0, api1, 'svc_messages_accepted_total', { source: 'smtp' })).toBe(M);
    expect(delta(api0, api1, 'svc_accept_duration_seconds_count', { source: 'api' })).toBe(N);
    expect(delta(api0, api1, 'svc_accept_duration_seconds_count', { source: 'smtp' })).toBe(M);
    expect(delta(wrk0, wrk1, 'svc_recipient_outcomes_total', { result: 'sent', site: 'sink.rcpt.test' })).toBe(N);
    expect(delta(wrk0, wrk1, 'svc_recipient_outcomes_total', { site: 'sink.rcpt.test' })).toBe(N);
    expect(delta(wrk0, wrk1, 'svc_webhook_attempts_total', { result: 'ok' })).toBe(M);
    expect(delta(wrk0, wrk1, 'svc_webhook_attempts_total')).toBe(M);
    expect(delta(wrk0, wrk1, 'svc_webhook_duration_seconds_count')).toBe(M);
    expect(hooks.hitsOn('/in')).toHaveLength(M);
    expect(s.sink.received.filter((r) => r.to.some((a) => a.endsWith('@rcpt.test')))).toHaveLength(N);
    // Queue depth is read from PostgreSQL on the scrape: every state is reported.
    for (const state of ['queued', 'sending', 'deferred', 'scheduled'])
      expect(api1.has(`svc_queue_depth{state="${state}"}`)).toBe(true);
  }, 90_000);

  it('the worker exposes the Temporal SDK metrics on TEMPORAL_METRICS_PORT', async () => {
    const res = await fetch(temporalMetrics);
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text).toMatch(/^temporal_\w*task_slots_available/m);
    expect(text).toMatch(/^temporal_\w*sticky_cache/m);
  });
});
