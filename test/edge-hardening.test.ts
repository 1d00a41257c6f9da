import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clientKey, parseTrustProxy } from '../core/net/client-address.js';
import { scrubText } from '../temporal/span-scrub.js';
import { createTestDatabase } from './helpers/pg.js';
import { freePort } from './helpers/ports.js';
import { startStack, type TestStack } from './helpers/stack.js';
import { startTcpProxy } from './helpers/tcp-proxy.js';

/** Issue 29, item 5: the edge findings (client addresses, /metrics, framing, public health). */
const TOKEN = 'operator-token-0123456789-edge';
const signup = (stack: TestStack, forwardedFor: string) =>
  stack.api('POST', '/api/auth/signup', {
    body: { email: `edge-${randomBytes(6).toString('hex')}@example.com`, password: 'edge password 1' },
    headers: { 'x-forwarded-for': forwardedFor },
  });

describe('client keys', () => {
  it('an IPv6 address counts by its /64, IPv4-mapped IPv6 as the IPv4 address, IPv4 as itself', () => {
    expect(clientKey('2001:db8:1:2::1')).toBe(clientKey('2001:0db8:0001:0002:ffff:abcd:0:9'));
    expect(clientKey('2001:db8:1:2::1')).toBe('2001:db8:1:2::/64');
    expect(clientKey('2001:db8:1:3::1')).not.toBe(clientKey('2001:db8:1:2::1'));
    expect(clientKey('::ffff:198.51.100.7')).toBe('198.51.100.7');
    expect(clientKey('198.51.100.7')).toBe('198.51.100.7');
    expect(clientKey('::1')).toBe('0:0:0:0::/64');
  });

  it('TRUST_PROXY takes false, true, a hop count or addresses and ranges, and nothing else', () => {
    expect(parseTrustProxy(undefined)).toBe(false);
    expect(parseTrustProxy('true')).toBe(true);
    expect(parseTrustProxy('2')).toBe(2);
    expect(parseTrustProxy('loopback, 10.0.0.0/8,fd00::/8')).toEqual(['loopback', '10.0.0.0/8', 'fd00::/8']);
    expect(parseTrustProxy('10.0.0.0/33')).toHaveProperty('error');
    expect(parseTrustProxy('proxy.example')).toHaveProperty('error');
  });
});

describe('trace scrubbing', () => {
  it('takes addresses, credentials and link tokens out of any text a span carries', () => {
    const text = scrubText(
      '550 5.1.1 <bob.smith+x@mail.example.org> unknown; GET /unsubscribe/abcdefghij0123456789?x=1 /auth/verify?token=s3cret&a=b Bearer svc_key_AAAA svc_pw_abc-def',
    );
    expect(text).not.toMatch(/bob\.smith|abcdefghij0123456789|s3cret|AAAA|abc-def/);
    expect(text).toContain('[address]');
    expect(text).toContain('/unsubscribe/[token]');
    expect(scrubText('a@b@c@'.repeat(10_000)).length).toBeLessThan(3000); // bounded, and a linear scan
  });
});

describe('without TRUST_PROXY or OPERATOR_TOKEN', () => {
  let stack: TestStack;
  let metricsPort: number;
  beforeAll(async () => {
    metricsPort = await freePort();
    stack = await startStack({ SIGNUP_LIMIT_PER_HOUR: '2', METRICS_PORT: String(metricsPort) }, ['api']);
  }, 60_000);
  afterAll(async () => stack?.stop());

  it('ignores X-Forwarded-For: a client that sends another address each time still gets one bucket', async () => {
    expect((await signup(stack, '203.0.113.1')).status).toBe(201);
    expect((await signup(stack, '203.0.113.2')).status).toBe(201);
    const third = await signup(stack, '203.0.113.3');
    expect(third.status).toBe(429);
    expect(third.body.code).toBe('rate_limited');
  });

  it('does not serve /metrics on the API port; METRICS_PORT (never published) does', async () => {
    const res = await fetch(`${stack.baseUrl}/metrics`);
    expect(res.status).toBe(404);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect((await res.json()).code).toBe('not_found');
    expect((await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).status).toBe(200);
  });

  it("every HTML page says frame-ancestors 'none'", async () => {
    const contact = `ctc_${randomBytes(18).toString('base64url')}`;
    const token = stack.service.core.unsubscribe.token(contact);
    const form = { 'content-type': 'application/x-www-form-urlencoded' };
    const pages: [string, string, Record<string, string>?, string?][] = [
      ['GET', `/unsubscribe/${token}`],
      ['POST', `/unsubscribe/${token}`, form, 'List-Unsubscribe=One-Click'],
      ['GET', '/unsubscribe/not-a-token'],
      ['POST', '/unsubscribe/not-a-token', form, ''],
      ['GET', '/auth/verify?token=nope'],
      ['GET', '/auth/signin?token=nope'],
      ['GET', '/auth/reset?token=nope'],
      ['GET', '/oauth/authorize'],
      ['GET', '/oauth/authorize?client_id=unknown'],
      ['GET', '/app'],
      ['GET', '/app/messages'],
    ];
    let html = 0;
    for (const [method, path, headers, body] of pages) {
      const res = await fetch(stack.baseUrl + path, { method, headers, body, redirect: 'manual' });
      await res.arrayBuffer();
      if (res.headers.get('content-type')?.includes('text/html')) html += 1;
      expect(res.headers.get('content-security-policy'), `${method} ${path}`).toMatch(/frame-ancestors 'none'/);
      expect(res.headers.get('x-frame-options'), `${method} ${path}`).toBe('DENY');
    }
    expect(html).toBeGreaterThanOrEqual(8);
  });
});

describe('with TRUST_PROXY and OPERATOR_TOKEN', () => {
  let stack: TestStack;
  let pg: Awaited<ReturnType<typeof createTestDatabase>>;
  let proxy: Awaited<ReturnType<typeof startTcpProxy>>;
  beforeAll(async () => {
    pg = await createTestDatabase();
    proxy = await startTcpProxy({ host: '127.0.0.1', port: Number(new URL(pg.url).port || 5432) });
    const url = new URL(pg.url);
    url.host = `127.0.0.1:${proxy.port}`;
    stack = await startStack(
      { SIGNUP_LIMIT_PER_HOUR: '2', TRUST_PROXY: 'loopback', OPERATOR_TOKEN: TOKEN, DATABASE_URL: url.toString() },
      ['api'],
    );
  }, 60_000);
  afterAll(async () => {
    proxy?.restore();
    await stack?.stop();
    await proxy?.close();
    await pg?.drop();
  });

  it('two clients behind the trusted proxy get a bucket each', async () => {
    expect((await signup(stack, '198.51.100.10')).status).toBe(201);
    expect((await signup(stack, '198.51.100.10')).status).toBe(201);
    expect((await signup(stack, '198.51.100.10')).status).toBe(429);
    expect((await signup(stack, '198.51.100.11')).status).toBe(201);
    // The proxy appends the address it saw: only the right-most untrusted hop counts, not what the client wrote.
    expect((await signup(stack, '198.51.100.11, 198.51.100.10')).status).toBe(429);
  });

  it('IPv6 clients in one /64 share a bucket; IPv4-mapped IPv6 is the IPv4 address', async () => {
    expect((await signup(stack, '2001:db8:7:1::1')).status).toBe(201);
    expect((await signup(stack, '2001:db8:7:1:ffff::2')).status).toBe(201);
    expect((await signup(stack, '2001:db8:7:1:abcd:1234:5678:9')).status).toBe(429);
    expect((await signup(stack, '2001:db8:7:2::1')).status).toBe(201);
    // 198.51.100.11 made one account above: its mapped form makes the second, and the plain form is then refused.
    expect((await signup(stack, '::ffff:198.51.100.11')).status).toBe(201);
    expect((await signup(stack, '198.51.100.11')).status).toBe(429);
  });

  it('/metrics on the API port needs the operator token', async () => {
    const refused = await fetch(`${stack.baseUrl}/metrics`);
    expect(refused.status).toBe(401);
    expect((await refused.json()).code).toBe('unauthorized');
    expect((await fetch(`${stack.baseUrl}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })).status).toBe(
      200,
    );
  });

  it('the public health check shows no raw error while the database is down; the operator sees it', async () => {
    proxy.cut();
    try {
      const pub = await stack.api('GET', '/api/health');
      expect(pub.status).toBe(503);
      expect(pub.body).toEqual({ ok: false, database: { ok: false, kind: 'postgres' }, temporal: { ok: true } });
      const op = await stack.api('GET', '/api/health', { token: TOKEN });
      expect(op.status).toBe(503);
      expect(op.body.database.error).toEqual(expect.any(String));
    } finally {
      proxy.restore();
    }
  });
});
