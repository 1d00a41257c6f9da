import { createServer, type Server } from 'node:net';
import type { AddressInfo } from 'node:net';
import nodemailer from 'nodemailer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, startStack, type TestStack } from './helpers/stack.js';
import { startWebhookReceiver } from './helpers/webhook-receiver.js';

const SERVICE = 'wh.svc.test';
const TIMEOUT_MS = 4000;
let stack: TestStack;
let hooks: Awaited<ReturnType<typeof startWebhookReceiver>>;
let hangUp: Server;
let token: string;

beforeAll(async () => {
  hooks = await startWebhookReceiver();
  // A receiver that accepts the connection and hangs up at once: a network failure, not an HTTP one.
  hangUp = createServer((socket) => socket.destroy());
  await new Promise<void>((r) => hangUp.listen(0, '127.0.0.1', r));
  stack = await startStack({
    SERVICE_DOMAIN: SERVICE,
    WEBHOOK_RETRY_SCHEDULE: '200,200',
    WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS),
  });
  token = (
    await stack.api('POST', '/api/auth/signup', { body: { email: 'health@example.com', password: 'health password' } })
  ).body.token;
});
afterAll(async () => {
  await stack?.stop();
  await hooks?.close();
  hangUp?.close();
});

/** A claimed domain with its catch-all webhook at `url`; answers its id. */
async function domainWithHook(label: string, url: string): Promise<string> {
  const id = (await stack.api('POST', '/api/domains/subdomain', { token, body: { subdomain: label } })).body.domain
    .id as string;
  expect((await stack.api('PUT', `/api/domains/${id}/webhook`, { token, body: { url } })).status).toBe(200);
  return id;
}
const mail = (to: string, extra: Record<string, unknown> = {}) =>
  nodemailer
    .createTransport({ host: '127.0.0.1', port: stack.service.smtpPort!, secure: false, ignoreTLS: true })
    .sendMail({ from: 'sender@far.example', to, subject: 'health', text: 'body', ...extra });
const statusOf = async (id: string) =>
  (await stack.api('GET', `/api/domains/${id}`, { token })).body.domain.webhookStatus;
/** The health is written just after the attempt it folds in: wait for the streak to reach `n`. */
/** A POST unanswered for a second marks the domain running: wait for the mark. */
const runningOf = (id: string) =>
  eventually(async () => {
    const s = await statusOf(id);
    return s?.status === 'running' ? s : undefined;
  });
const streakOf = (id: string, n: number) =>
  eventually(async () => {
    const s = await statusOf(id);
    return s?.consecutiveFailures === n ? s : undefined;
  });
const deliveryOf = async (messageId: string) =>
  (await stack.api('GET', `/api/messages/${messageId}`, { token })).body.deliveries?.[0];
/** Waits until the message's first delivery ran its whole ladder and failed; answers it. */
const failedDelivery = (messageId: string) =>
  eventually(async () => {
    const d = await deliveryOf(messageId);
    return d?.status === 'failed' ? d : undefined;
  }, 30_000);
const attemptsOf = async (deliveryId: string) =>
  (await stack.api('GET', `/api/deliveries/${deliveryId}/attempts`, { token })).body.attempts;

describe('webhookStatus', () => {
  it('is running while a delivery is in flight, then ok', async () => {
    const id = await domainWithHook('held', `${hooks.base}/held`);
    expect(await statusOf(id)).toBeNull();
    hooks.hold('/held');
    await mail(`x@held.${SERVICE}`);
    await hooks.waitFor('/held');
    // The receiver has the request and does not answer: the delivery is in flight.
    expect(await runningOf(id)).toMatchObject({
      message: 'Delivery in flight',
      code: null,
      consecutiveFailures: 0,
      unhealthy: false,
    });
    hooks.release('/held');
    const ok = await eventually(async () => {
      const s = await statusOf(id);
      return s?.status === 'ok' ? s : undefined;
    });
    expect(ok).toMatchObject({ code: 200, consecutiveFailures: 0, firstFailedAt: null, unhealthy: false });
  });

  it('turns unhealthy at the 5th failed attempt in a row, and healthy again on a success', async () => {
    let failing = true;
    hooks.on('/down', (_hit, count) => {
      // Attempts 5 and 6 wait for the test, so it sees the streak just before each of them.
      if (count === 5 || count === 6) hooks.hold('/down');
      return failing ? { status: 500 } : { status: 200 };
    });
    const id = await domainWithHook('down', `${hooks.base}/down`);
    await mail(`a@down.${SERVICE}`);
    const first = (await hooks.waitFor('/down'))[0]!.json.id;
    await failedDelivery(first);
    const three = await streakOf(id, 3);
    expect(three).toMatchObject({ status: 'fail', code: 500, unhealthy: false, firstFailedAt: expect.any(Number) });
    await mail(`b@down.${SERVICE}`);
    const second = (await hooks.waitFor('/down', 5)).find((h) => h.json.id !== first)!.json.id;
    expect(await runningOf(id)).toMatchObject({ consecutiveFailures: 4, unhealthy: false });
    hooks.release('/down');
    await hooks.waitFor('/down', 6);
    expect(await runningOf(id)).toMatchObject({
      consecutiveFailures: 5,
      unhealthy: true,
      firstFailedAt: three.firstFailedAt,
    });
    hooks.release('/down');
    await failedDelivery(second);
    expect(await streakOf(id, 6)).toMatchObject({
      status: 'fail',
      unhealthy: true,
      firstFailedAt: three.firstFailedAt,
    });
    failing = false;
    const replayed = await stack.api('POST', '/api/deliveries/retry', { token, body: { messageIds: [second] } });
    expect(replayed.body).toMatchObject({ delivered: 1 });
    expect(await statusOf(id)).toMatchObject({
      status: 'ok',
      consecutiveFailures: 0,
      firstFailedAt: null,
      unhealthy: false,
    });
  });

  it('timeout is its own failure class: attempts, webhookStatus and bulk replay say timeout', async () => {
    hooks.hold('/silent');
    const id = await domainWithHook('silent', `${hooks.base}/silent`);
    await mail(`x@silent.${SERVICE}`);
    const messageId = (await hooks.waitFor('/silent'))[0]!.json.id;
    const d = await failedDelivery(messageId);
    const attempts = await attemptsOf(d.id);
    expect(attempts.map((a: any) => a.reason)).toEqual(['timeout', 'timeout', 'timeout']);
    expect(attempts[0]).toMatchObject({ ok: 0, response_status: null });
    expect(attempts[0].duration_ms).toBeGreaterThanOrEqual(TIMEOUT_MS - 50);
    expect(await streakOf(id, 3)).toMatchObject({ status: 'timeout', code: null, unhealthy: false });
    const res = await stack.api('POST', '/api/deliveries/retry', { token, body: { messageIds: [messageId] } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ ok: false, requested: 1, delivered: 0, failed: 1, skipped: 0 });
    expect(res.body.results[0]).toMatchObject({ messageId, ok: false, status: null, reason: 'timeout' });
    hooks.release('/silent');
  });

  it('a receiver that hangs up is a network failure, in attempts and in bulk replay', async () => {
    await domainWithHook('hangup', `http://127.0.0.1:${(hangUp.address() as AddressInfo).port}/hook`);
    await mail(`x@hangup.${SERVICE}`);
    const messageId = await eventually(
      async () =>
        (await stack.api('GET', `/api/messages?direction=inbound&search=hangup.${SERVICE}`, { token })).body[0]?.id as
          string | undefined,
    );
    const d = await failedDelivery(messageId);
    expect((await attemptsOf(d.id)).map((a: any) => a.reason)).toEqual(['network', 'network', 'network']);
    const res = await stack.api('POST', '/api/deliveries/retry', { token, body: { deliveryIds: [d.id] } });
    expect(res.status).toBe(200);
    expect(res.body.results[0]).toMatchObject({
      deliveryId: expect.stringMatching(/^dlv_/),
      ok: false,
      status: null,
      reason: 'network',
    });
  });
});

describe('attempt capture', () => {
  it('cuts the request and response bodies to about 4 KB', async () => {
    const big = 'x'.repeat(20_000);
    hooks.on('/big', () => ({ status: 200, body: JSON.stringify({ status: 'ok', echo: big }) }));
    await domainWithHook('big', `${hooks.base}/big`);
    await mail(`x@big.${SERVICE}`, { text: `start ${'long line of text '.repeat(1500)} end` });
    const [hit] = await hooks.waitFor('/big');
    expect(hit!.body.length).toBeGreaterThan(20_000);
    const d = await eventually(async () => {
      const x = await deliveryOf(hit!.json.id);
      return x?.status === 'delivered' ? x : undefined;
    });
    const [a] = await attemptsOf(d.id);
    expect(Buffer.byteLength(a.request_body)).toBe(4096);
    expect(hit!.body.startsWith(a.request_body)).toBe(true);
    expect(Buffer.byteLength(a.response_body)).toBe(4096);
    expect(JSON.stringify({ status: 'ok', echo: big }).startsWith(a.response_body)).toBe(true);
  });
});
