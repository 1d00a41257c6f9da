import { generateKeyPairSync } from 'node:crypto';
import { eq } from 'drizzle-orm';
import nodemailer from 'nodemailer';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { decryptRsaOaepEnvelope } from '../core/inbound/encryption.js';
import { schema } from '../db/index.js';
import { startWorker } from '../worker.js';
import { startTestDns } from './helpers/dns.js';
import { eventually, startStack, type TestStack } from './helpers/stack.js';
import { startWebhookReceiver } from './helpers/webhook-receiver.js';

const SERVICE = 'rp.svc.test';
let stack: TestStack;
let dns: Awaited<ReturnType<typeof startTestDns>>;
let hooks: Awaited<ReturnType<typeof startWebhookReceiver>>;
let token: string;

beforeAll(async () => {
  dns = await startTestDns();
  hooks = await startWebhookReceiver();
  stack = await startStack({
    SERVICE_DOMAIN: SERVICE,
    DNS_SERVERS: dns.server.address,
    WEBHOOK_RETRY_SCHEDULE: '400,400',
  });
  token = (
    await stack.api('POST', '/api/auth/signup', {
      body: { email: 'replayer@example.com', password: 'replayer password' },
    })
  ).body.token;
});
afterAll(async () => {
  await stack?.stop();
  await hooks?.close();
  await dns?.close();
});

const smtp = () =>
  nodemailer.createTransport({ host: '127.0.0.1', port: stack.service.smtpPort!, secure: false, ignoreTLS: true });
const claim = async (label: string) =>
  (await stack.api('POST', '/api/domains/subdomain', { token, body: { subdomain: label } })).body.domain.id as string;
const hook = (id: string, path: string) =>
  stack.api('PUT', `/api/domains/${id}/webhook`, { token, body: { url: `${hooks.base}${path}` } });
const mail = (to: string, extra: Record<string, unknown> = {}) =>
  smtp().sendMail({ from: 'sender@far.example', to, subject: 's', text: 'body', ...extra });
const deliveriesOf = async (messageId: string) =>
  (await stack.api('GET', `/api/messages/${messageId}`, { token })).body.deliveries;

describe('routes', () => {
  it('the most specific pattern wins; webhook URLs must be https except loopback', async () => {
    const id = await claim('routed');
    await hook(id, '/catchall');
    const mk = (address: string, path: string) =>
      stack.api('POST', '/api/routes', { token, body: { domainId: id, address, url: `${hooks.base}${path}` } });
    expect((await mk('support-*', '/support')).status).toBe(201);
    expect((await mk('*-agent', '/agent')).status).toBe(201);
    expect((await mk('support-vip', '/vip')).status).toBe(201);
    expect((await mk('a@b', '/x')).body.code).toBe('invalid_pattern');
    expect(
      (
        await stack.api('POST', '/api/routes', {
          token,
          body: { domainId: id, address: 'x', url: 'http://example.com/hook' },
        })
      ).body.code,
    ).toBe('invalid_webhook_url');
    expect(
      (await stack.api('PUT', `/api/domains/${id}/webhook`, { token, body: { url: 'ftp://example.com' } })).status,
    ).toBe(400);
    for (const [local, path] of [
      ['support-vip', '/vip'],
      ['support-billing', '/support'],
      ['sales-agent', '/agent'],
      ['random', '/catchall'],
    ]) {
      await mail(`${local}@routed.${SERVICE}`);
      const hits = await hooks.waitFor(path!);
      expect(
        hits.some((h) => h.json.to[0].address === `${local}@routed.${SERVICE}`),
        `${local} → ${path}`,
      ).toBe(true);
    }
    const list = (await stack.api('GET', '/api/routes', { token })).body;
    expect(list.map((r: any) => r.pattern).sort()).toEqual(['*', '*-agent', 'support-*', 'support-vip']);
    const vip = list.find((r: any) => r.pattern === 'support-vip');
    expect((await stack.api('DELETE', `/api/routes/${vip.id}`, { token })).body).toEqual({ ok: true });
  });

  it('routes and webhooks need a domain with verified MX', async () => {
    const pending = (await stack.api('POST', '/api/domains', { token, body: { domain: 'pending-mx.example.com' } }))
      .body.domain.id;
    expect((await hook(pending, '/nope')).body.code).toBe('domain_not_verified');
  });
});

describe('replay', () => {
  let messageId: string;
  let deliveryId: string;
  beforeAll(async () => {
    const id = await claim('replay');
    await hook(id, '/replay');
    await mail(`x@replay.${SERVICE}`, { subject: 'replay me', references: '<thread-root@far.example>' });
    messageId = (await hooks.waitFor('/replay'))[0]!.json.id;
    deliveryId = (
      await eventually(async () => {
        const d = (await deliveriesOf(messageId))[0];
        return d?.status === 'delivered' ? d : undefined;
      })
    ).id;
  });

  it('retries one delivery as a new row, leaving the original untouched; 404 for another account', async () => {
    const res = await stack.api('POST', `/api/deliveries/${deliveryId}/retry`, { token });
    expect(res.body).toMatchObject({
      ok: true,
      status: 200,
      delivery: { message_id: messageId, status: 'delivered', attempts: 1 },
    });
    expect(res.body.delivery.id).not.toBe(deliveryId);
    expect(await hooks.waitFor('/replay', 2)).toHaveLength(2);
    const rows = await deliveriesOf(messageId);
    expect(rows).toHaveLength(2);
    expect(rows.find((r: any) => r.id === deliveryId)).toMatchObject({ status: 'delivered', attempts: 1 });
    const other = (
      await stack.api('POST', '/api/auth/signup', { body: { email: 'intruder@example.com', password: 'intruder pw' } })
    ).body.token;
    expect((await stack.api('POST', `/api/deliveries/${deliveryId}/retry`, { token: other })).status).toBe(404);
    expect((await stack.api('GET', `/api/deliveries/${deliveryId}/attempts`, { token: other })).status).toBe(404);
  });

  it('bulk replay: threads expand, one POST per endpoint per message, skips are reported', async () => {
    const before = hooks.hitsOn('/replay').length;
    const res = await stack.api('POST', '/api/deliveries/retry', {
      token,
      body: {
        deliveryIds: [deliveryId, 'dlv_doesnotexist000000000000'],
        messageIds: [messageId, 'msg_nothing0000000000000000'],
        threadIds: ['<thread-root@far.example>'],
      },
    });
    expect(res.status).toBe(200);
    const reasons = res.body.results.map((r: any) => r.reason).sort();
    // The thread expands to the same message as messageIds, so it adds nothing; that message's endpoint was already hit via deliveryIds.
    expect(reasons).toEqual([null, 'duplicate_endpoint', 'no_delivery', 'not_found'].sort());
    expect(res.body).toMatchObject({ ok: false, delivered: 1, failed: 0, skipped: 3, requested: 4 });
    expect(res.body.requested).toBe(res.body.results.length);
    // Replay posts within the request: the receiver has every hit it will get once the answer is here.
    expect(hooks.hitsOn('/replay')).toHaveLength(before + 1);
    expect((await stack.api('POST', '/api/deliveries/retry', { token, body: {} })).status).toBe(400);
  });

  it('bulk replay answers 200 past the 50-id cap: each id past it is a skipped too_many_ids result', async () => {
    const many = Array.from({ length: 52 }, (_, i) => `msg_${String(i).padStart(24, '0')}`);
    const before = hooks.hitsOn('/replay').length;
    const res = await stack.api('POST', '/api/deliveries/retry', {
      token,
      body: { deliveryIds: [deliveryId], messageIds: many },
    });
    expect(res.status).toBe(200);
    // 1 delivery id and the first 49 message ids make the 50; the last 3 message ids are past the cap.
    expect(res.body).toMatchObject({ ok: false, requested: 53, delivered: 1, failed: 0, skipped: 52 });
    expect(res.body.results).toHaveLength(53);
    const past = res.body.results.filter((r: any) => r.reason === 'too_many_ids');
    expect(past.map((r: any) => r.messageId)).toEqual(many.slice(49));
    expect(
      past.every((r: any) => r.ok === false && r.status === null && r.deliveryId === null && r.routeId === null),
    ).toBe(true);
    expect(res.body.results.filter((r: any) => r.reason === 'no_delivery')).toHaveLength(49);
    await hooks.waitFor('/replay', before + 1);

    const deliveriesPast = Array.from({ length: 51 }, (_, i) => `dlv_${String(i).padStart(24, '0')}`);
    const onlyDeliveries = await stack.api('POST', '/api/deliveries/retry', {
      token,
      body: { deliveryIds: deliveriesPast, threadIds: ['<root@nowhere.example>'] },
    });
    expect(onlyDeliveries.status).toBe(200);
    expect(onlyDeliveries.body).toMatchObject({ ok: false, requested: 52, delivered: 0, failed: 0, skipped: 52 });
    expect(
      onlyDeliveries.body.results.filter((r: any) => r.reason === 'too_many_ids').map((r: any) => r.deliveryId),
    ).toEqual(['dlv_000000000000000000000050']);
    expect(onlyDeliveries.body.results.find((r: any) => r.threadId)).toEqual({
      threadId: '<root@nowhere.example>',
      messageId: null,
      routeId: null,
      deliveryId: null,
      ok: false,
      status: null,
      reason: 'not_found',
    });
  });

  it('reports failure classes for endpoints that fail', async () => {
    const id = await claim('failing');
    await hook(id, '/down');
    hooks.on('/down', () => ({ status: 500 }));
    await mail(`x@failing.${SERVICE}`);
    const mid = (await hooks.waitFor('/down'))[0]!.json.id;
    await eventually(async () => (await deliveriesOf(mid))[0]?.status === 'failed');
    const res = await stack.api('POST', '/api/deliveries/retry', { token, body: { messageIds: [mid] } });
    expect(res.body.results[0]).toMatchObject({ ok: false, status: 500, reason: 'http' });
    expect(res.body).toMatchObject({ failed: 1, delivered: 0, skipped: 0 });
  });
});

describe('durability', () => {
  it('killing the worker mid-retry and starting it again delivers the message exactly once', async () => {
    const id = await claim('durable');
    await hook(id, '/durable');
    let healthy = false;
    hooks.on('/durable', () => (healthy ? { status: 200 } : { status: 503 }));
    await mail(`x@durable.${SERVICE}`);
    await hooks.waitFor('/durable', 1);
    await stack.service.worker!.shutdown();
    healthy = true;
    stack.service.worker = await startWorker({
      core: stack.service.core,
      address: stack.service.temporalAddress,
      workflowBundle: { codePath: inject('workflowBundlePath') },
    });
    const hits = await hooks.waitFor('/durable', 2);
    // Delivered is final: once the row says so, no attempt is left to post again.
    await eventually(async () => (await deliveriesOf(hits[0]!.json.id))[0]?.status === 'delivered');
    expect(hooks.hitsOn('/durable')).toHaveLength(2);
    const ok = hooks.hitsOn('/durable').filter((_h, i) => i > 0);
    expect(ok).toHaveLength(1);
    expect((await deliveriesOf(hits[0]!.json.id))[0]).toMatchObject({ status: 'delivered', attempts: 2 });
  });
});

describe('retention', () => {
  it('zero retention delivers with inline attachments and keeps nothing to replay', async () => {
    const id = await claim('ephemeral');
    expect(
      (await stack.api('PATCH', `/api/domains/${id}`, { token, body: { zero_retention: 1 } })).body.domain
        .zero_retention,
    ).toBe(1);
    await hook(id, '/zero');
    await mail(`x@ephemeral.${SERVICE}`, {
      subject: 'secret',
      attachments: [{ filename: 'a.txt', content: 'inline me' }],
    });
    const [hit] = await hooks.waitFor('/zero');
    expect(hit!.json.attachments[0]).toMatchObject({
      filename: 'a.txt',
      content: Buffer.from('inline me').toString('base64'),
    });
    expect(hit!.json.attachments[0].url).toBeUndefined();
    const mid = hit!.json.id;
    await eventually(
      async () =>
        (await stack.service.core.db.select().from(schema.inboundRaw).where(eq(schema.inboundRaw.messageId, mid)))
          .length === 0,
    );
    const [row] = await stack.service.core.db.select().from(schema.messages).where(eq(schema.messages.id, mid));
    expect(row).toMatchObject({ subject: null, text: null, html: null });
    const dlv = (await deliveriesOf(mid))[0];
    expect((await stack.api('POST', `/api/deliveries/${dlv.id}/retry`, { token })).body.code).toBe('no_delivery');
  });

  it('an encrypted domain stores the message only encrypted; it decrypts with the private key', async () => {
    const id = await claim('sealed');
    const { publicKey, privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const set = await stack.api('PUT', `/api/domains/${id}/encryption`, {
      token,
      body: { publicKey: publicKey.export({ type: 'spki', format: 'pem' }) },
    });
    expect(set.body.domain).toMatchObject({ enc_key_alg: 'RSA-OAEP-256' });
    await hook(id, '/sealed');
    await mail(`x@sealed.${SERVICE}`, { subject: 'for your eyes only', text: 'classified body' });
    const [hit] = await hooks.waitFor('/sealed');
    expect(hit!.json.text.trim()).toBe('classified body');
    const mid = hit!.json.id;
    await eventually(
      async () =>
        (await stack.service.core.db.select().from(schema.inboundRaw).where(eq(schema.inboundRaw.messageId, mid)))[0]
          ?.payloadSealed === null,
    );
    const [raw] = await stack.service.core.db
      .select()
      .from(schema.inboundRaw)
      .where(eq(schema.inboundRaw.messageId, mid));
    expect(raw!.encrypted).toBe(true);
    expect(raw!.content.toString('latin1')).not.toContain('classified');
    const plain = decryptRsaOaepEnvelope(raw!.content, privateKey.export({ type: 'pkcs8', format: 'pem' }) as string);
    expect(plain.toString()).toContain('Subject: for your eyes only');
    expect(plain.toString()).toContain('classified body');
    const [row] = await stack.service.core.db.select().from(schema.messages).where(eq(schema.messages.id, mid));
    expect(row!.text).toBeNull();
  });
});
