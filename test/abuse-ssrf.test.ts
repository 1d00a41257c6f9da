import nodemailer from 'nodemailer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDnsServer, type DnsServer } from '../dns/server.js';
import { createStaticZone } from '../dns/static-zone.js';
import { eventually, startStack, type TestStack } from './helpers/stack.js';
import { startWebhookReceiver } from './helpers/webhook-receiver.js';

/**
 * Outbound connections cannot reach inside: the stack runs WITHOUT ALLOW_PRIVATE_NETWORKS, as in
 * production. A loopback receiver stands for the internal service an attacker wants to reach.
 */
const SERVICE = 'ssrf.svc.test';
let stack: TestStack;
let dns: DnsServer;
let inside: Awaited<ReturnType<typeof startWebhookReceiver>>;
let token: string;
let domainId: string;
let key: string;
const zone = createStaticZone();
let rebindLookups = 0;

beforeAll(async () => {
  inside = await startWebhookReceiver();
  zone.set('public.example', 'A', [{ value: '203.0.113.10' }]);
  zone.set('evil.test', 'MX', [{ value: 'mx.evil.test', priority: 10 }]);
  zone.set('mx.evil.test', 'A', [{ value: '10.0.0.1' }]);
  zone.set('loop.evil.test', 'MX', [{ value: 'mx.loop.evil.test', priority: 10 }]);
  zone.set('mx.loop.evil.test', 'A', [{ value: '127.0.0.1' }]);
  // rebind.example answers a public address the first time it is asked, loopback ever after.
  dns = await startDnsServer({
    port: 0,
    lookup: async (name, type) => {
      if (name === 'rebind.example' && type === 'A') {
        rebindLookups += 1;
        return {
          authoritative: true,
          nameExists: true,
          records: [{ name, type: 'A', value: rebindLookups === 1 ? '203.0.113.20' : '127.0.0.1', ttl: 0 }],
        };
      }
      if (name === 'rebind.example') return { authoritative: true, nameExists: true, records: [] };
      return zone.lookup(name, type);
    },
  });
  stack = await startStack({
    SERVICE_DOMAIN: SERVICE,
    DNS_SERVERS: dns.address,
    ALLOW_PRIVATE_NETWORKS: '0',
    OUTBOUND_MODE: 'mx',
    MX_PORT: '25',
    WEBHOOK_RETRY_SCHEDULE: '',
  });
  const up = (
    await stack.api('POST', '/api/auth/signup', { body: { email: 'ssrf@example.com', password: 'ssrf password' } })
  ).body;
  token = up.token;
  const { schema } = await import('../db/index.js');
  const { eq } = await import('drizzle-orm');
  await stack.service.core.db.update(schema.users).set({ emailVerified: true }).where(eq(schema.users.id, up.user.id));
  domainId = (await stack.api('POST', '/api/domains/subdomain', { token, body: { subdomain: 'box' } })).body.domain.id;
  key = (await stack.api('GET', '/api/keys', { token })).body.key;
});
afterAll(async () => {
  await stack?.stop();
  await dns?.close();
  await inside?.close();
});

const setHook = (url: string) => stack.api('PUT', `/api/domains/${domainId}/webhook`, { token, body: { url } });

describe('webhook, route and tracking-webhook URLs', () => {
  it.each([
    ['https://10.0.0.1/hook'],
    ['https://169.254.169.254/latest/meta-data/'],
    ['https://[::ffff:127.0.0.1]/hook'],
    ['https://[::ffff:7f00:1]/hook'],
    ['https://100.64.0.1/hook'],
    ['https://[fd00::1]/hook'],
    ['https://[::]/hook'],
    ['https://0.0.0.0/hook'],
    ['http://127.0.0.1:9/hook'],
    ['http://localhost:9/hook'],
  ])('%s is refused at creation', async (url) => {
    for (const res of [
      await setHook(url),
      await stack.api('POST', '/api/routes', { token, body: { domainId, address: 'ops', url } }),
      await stack.api('PUT', `/api/domains/${domainId}/tracking-webhook`, { token, body: { url } }),
    ]) {
      expect(res.status, JSON.stringify(res.body)).toBe(400);
      expect(['webhook_url_blocked', 'invalid_webhook_url']).toContain(res.body.code);
    }
  });

  it('a name that resolves to loopback on its second lookup is refused at connect', async () => {
    const url = `https://rebind.example:${new URL(inside.base).port}/hook`;
    expect((await setHook(url)).status).toBe(200); // first lookup: a public address
    const smtp = nodemailer.createTransport({
      host: '127.0.0.1',
      port: stack.service.smtpPort!,
      secure: false,
      ignoreTLS: true,
    });
    const info = await smtp.sendMail({ from: 'a@far.example', to: `in@box.${SERVICE}`, subject: 'rebind', text: 'x' });
    const messageId = /as (msg_[\w-]+)/.exec(info.response)![1]!;
    const attempt = await eventually(async () => {
      const dlv = (await stack.api('GET', `/api/messages/${messageId}`, { token })).body.deliveries?.[0];
      if (!dlv) return undefined;
      const attempts = (await stack.api('GET', `/api/deliveries/${dlv.id}/attempts`, { token })).body;
      return (Array.isArray(attempts) ? attempts : attempts.attempts)?.[0];
    });
    expect(JSON.stringify(attempt)).toMatch(/internal address/);
    expect(rebindLookups).toBeGreaterThanOrEqual(2);
    expect(inside.hits).toHaveLength(0);
  });
});

describe('MX targets', () => {
  it.each([
    ['evil.test', '10.0.0.1'],
    ['loop.evil.test', '127.0.0.1'],
  ])('mail to %s (MX at %s) is not delivered there', async (domain) => {
    const res = await stack.api('POST', '/v1/send', {
      token: key,
      body: { from: `hi@box.${SERVICE}`, to: `victim@${domain}`, subject: 's', text: 't' },
    });
    expect(res.status).toBe(200);
    const msg = await eventually(async () => {
      const m = (await stack.api('GET', `/api/messages/${res.body.id}`, { token })).body.message;
      return m.last_error ? m : undefined;
    }, 30_000);
    expect(msg.last_error).toMatch(/internal address/);
    expect(msg.status).not.toBe('sent');
  });
});
