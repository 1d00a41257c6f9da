import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolverFor } from './helpers/dns.js';
import { freePort } from './helpers/ports.js';
import { startStack, type TestStack } from './helpers/stack.js';

const BASE = 'hosted.svc.test';
let stack: TestStack;
let token: string;
let dnsPort: number;

beforeAll(async () => {
  dnsPort = await freePort();
  stack = await startStack({
    SERVICE_DOMAIN: BASE,
    DNS_PORT: String(dnsPort),
    REGISTRAR: 'simulated',
    PUBLIC_IP: '192.0.2.25',
  });
  token = (
    await stack.api('POST', '/api/auth/signup', { body: { email: 'hosted@example.com', password: 'hosted owner pw' } })
  ).body.token;
});
afterAll(async () => {
  await stack?.stop();
});

const check = (name: string) =>
  stack.api('GET', `/api/domains/subdomain/check?name=${encodeURIComponent(name)}`, { token });
const dnsAt = () => resolverFor(`127.0.0.1:${dnsPort}`);

describe('hosted subdomains', () => {
  it('suggests a free label under the base zone', async () => {
    const res = await stack.api('GET', '/api/domains/subdomain/suggest', { token });
    expect(res.body.base).toBe(BASE);
    expect(res.body.domain).toBe(`${res.body.subdomain}.${BASE}`);
    expect((await check(res.body.subdomain)).body).toEqual({ available: true, domain: res.body.domain });
  });

  it.each([
    ['ab', 'At least 3 characters', true],
    ['a.b.c', 'Use a single label (no dots)', false],
    ['hello_world', 'Use letters, numbers and hyphens only', false],
    ['www', 'That subdomain is reserved', true],
    ['postmaster', 'That subdomain is reserved', true],
    ['-edge', 'Cannot start or end with a hyphen', true],
    ['x'.repeat(33), 'At most 32 characters', true],
  ])('check %s → %s', async (name, reason, hasDomain) => {
    const res = await check(name);
    expect(res.status).toBe(200);
    expect(res.body.available).toBe(false);
    expect(res.body.reason).toBe(reason);
    expect('domain' in res.body).toBe(hasDomain);
  });

  it('claims a label (also given as label.base): verified, four checks passing, no records to publish', async () => {
    const res = await stack.api('POST', '/api/domains/subdomain', { token, body: { subdomain: `Acme-Mail.${BASE}` } });
    expect(res.status).toBe(201);
    expect(res.body.dns).toEqual([]);
    expect(res.body.domain).toMatchObject({
      domain: `acme-mail.${BASE}`,
      status: 'verified',
      mx_verified: 1,
      spf_verified: 1,
      dkim_verified: 1,
      dmarc_verified: 1,
    });
    expect((await check('acme-mail')).body).toEqual({
      available: false,
      reason: 'Already taken',
      domain: `acme-mail.${BASE}`,
    });
    const again = await stack.api('POST', '/api/domains/subdomain', { token, body: { subdomain: 'acme-mail' } });
    expect(again).toMatchObject({ status: 409, body: { code: 'subdomain_taken' } });
    expect(
      (await stack.api('POST', '/api/domains/subdomain', { token, body: { subdomain: 'no' } })).body,
    ).toMatchObject({ code: 'invalid_subdomain', error: 'At least 3 characters' });
    expect((await stack.api('GET', '/v1/me', { token })).body.sendingDomains).toContain(`acme-mail.${BASE}`);
  });

  it('the built-in DNS server answers real queries for the claimed subdomain, until it is deleted', async () => {
    const claimed = await stack.api('POST', '/api/domains/subdomain', { token, body: { subdomain: 'resolves' } });
    const name = `resolves.${BASE}`;
    const r = dnsAt();
    // The row's own MX host, which the same server answers with the ingress address (PUBLIC_IP).
    const [mx] = await r.resolveMx(name);
    expect(mx).toMatchObject({
      exchange: expect.stringMatching(new RegExp(`^[0-9a-f]{20}\\.mx\\.${BASE.replace(/\./g, '\\.')}$`)),
      priority: 10,
    });
    expect(await r.resolve4(mx!.exchange)).toEqual(['192.0.2.25']);
    const apex = (await r.resolveTxt(name)).map((c) => c.join(''));
    expect(apex).toContain(`v=spf1 include:${BASE} ~all`);
    const dkim = (await r.resolveTxt(`svc1._domainkey.${name}`)).map((c) => c.join(''));
    expect(dkim[0]).toMatch(/^v=DKIM1; k=rsa; p=[A-Za-z0-9+/=]{300,}$/);
    const dmarc = (await r.resolveTxt(`_dmarc.${name}`)).map((c) => c.join(''));
    expect(dmarc[0]).toMatch(/^v=DMARC1;/);
    // Reports about the domain come to the platform (docs/feedback.md): TLS-RPT's rua, and RFC 7489 7.1's authorization.
    expect((await r.resolveTxt(`_smtp._tls.${name}`)).map((c) => c.join(''))).toEqual([
      `v=TLSRPTv1; rua=mailto:tlsrpt@${BASE}`,
    ]);
    expect((await r.resolveTxt(`${name}._report._dmarc.${BASE}`)).map((c) => c.join(''))).toEqual(['v=DMARC1']);
    await expect(r.resolveTxt(`other.example._report._dmarc.${BASE}`)).rejects.toMatchObject({ code: 'ENOTFOUND' });
    await expect(r.resolveMx(`nothing-here.${BASE}`)).rejects.toMatchObject({ code: 'ENOTFOUND' });

    const del = await stack.api('DELETE', `/api/domains/${claimed.body.domain.id}`, { token });
    // MX, SPF, DKIM, DMARC, TLS-RPT, and the return path's MX and SPF.
    expect(del.body.cleanup.dnsDeleted).toBe(7);
    await expect(dnsAt().resolveMx(name)).rejects.toMatchObject({ code: 'ENOTFOUND' });
  });
});

describe('registration (simulated registrar)', () => {
  const contact = {
    firstName: 'Ada',
    lastName: 'Lovelace',
    email: 'ada@example.com',
    phone: '+44.2071234567',
    address: '12 Analytical St',
    city: 'London',
    zip: 'N1 9GU',
    country: 'GB',
    state: 'GB-LND',
    type: 'individual',
  };
  const rcheck = (d: string) => stack.api('GET', `/api/domains/register/check?domain=${d}`, { token });

  it('prices available names, refuses taken and premium ones', async () => {
    expect((await rcheck('Ada-Shop.com')).body).toEqual({
      configured: true,
      domain: 'ada-shop.com',
      available: true,
      premium: false,
      reason: 'Available',
      price: { amount: 12, currency: 'USD', period: 1, periodUnit: 'y' },
    });
    expect((await rcheck('taken-name.com')).body).toMatchObject({ available: false, premium: false });
    expect((await rcheck('abc.io')).body).toMatchObject({ available: true, premium: true });
    expect((await rcheck('nice.weirdtld')).body).toMatchObject({ available: false });
    expect((await rcheck('10.0.0.1')).status).toBe(400);
  });

  it('dry run prices without charging or adding anything', async () => {
    const res = await stack.api('POST', '/api/domains/register', {
      token,
      body: { domain: 'dry-run.com', contact, years: 2, dryRun: true },
    });
    expect(res.body).toEqual({
      registration: {
        status: 'dry_run',
        reference: null,
        domain: 'dry-run.com',
        charge: { amount: 24, currency: 'USD', years: 2 },
      },
      dryRun: true,
    });
    expect((await stack.api('GET', '/api/domains', { token })).body.map((d: any) => d.domain)).not.toContain(
      'dry-run.com',
    );
  });

  it.each([
    ['phone', '4155550100'],
    ['phone', '+1-415-555-0100'],
    ['country', 'gb'],
    ['country', 'XX'],
    ['state', 'California'],
    ['state', 'US-CA'],
    ['email', 'not-an-email'],
    ['type', 'government'],
    ['firstName', ''],
  ])('rejects contact.%s = %j', async (field, value) => {
    const res = await stack.api('POST', '/api/domains/register', {
      token,
      body: { domain: 'valid-name.com', contact: { ...contact, [field]: value }, dryRun: true },
    });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('validation_error');
    expect(res.body.error).toContain(field);
  });

  it('rejects missing contact fields and premium or taken names', async () => {
    for (const field of ['firstName', 'lastName', 'email', 'phone', 'address', 'city', 'zip', 'country']) {
      const { [field]: _gone, ...rest } = contact as Record<string, string>;
      const res = await stack.api('POST', '/api/domains/register', {
        token,
        body: { domain: 'valid-name.com', contact: rest, dryRun: true },
      });
      expect(res.status, field).toBe(400);
    }
    expect(
      (await stack.api('POST', '/api/domains/register', { token, body: { domain: 'abc.com', contact } })).body.code,
    ).toBe('premium_domain');
    expect(
      (await stack.api('POST', '/api/domains/register', { token, body: { domain: 'taken-x.com', contact } })).body.code,
    ).toBe('domain_unavailable');
  });

  it('registers, hosts the mail DNS and adds the domain in one call', async () => {
    const res = await stack.api('POST', '/api/domains/register', {
      token,
      body: { domain: 'lovelace-mail.com', contact, years: 1 },
    });
    expect(res.status).toBe(200);
    expect(res.body.registration).toMatchObject({ status: 'registered', reference: expect.stringMatching(/^sim-/) });
    expect(res.body.charge).toEqual({ amount: 12, currency: 'USD', years: 1 });
    expect(res.body.domain).toMatchObject({ domain: 'lovelace-mail.com', status: 'verified', mx_verified: 1 });
    expect(res.body.dns.map((r: any) => r.type)).toContain('MX');
    expect((await dnsAt().resolveMx('lovelace-mail.com'))[0]!.exchange).toMatch(
      new RegExp(`^[0-9a-f]{20}\\.mx\\.${BASE.replace(/\./g, '\\.')}$`),
    );
    expect((await rcheck('lovelace-mail.com')).body).toMatchObject({ available: false, reason: 'Already registered' });
  });
});

describe('registration not configured', () => {
  it('says configured: false and refuses to register', async () => {
    const plain = await startStack({}, ['api']);
    try {
      const t = (
        await plain.api('POST', '/api/auth/signup', {
          body: { email: 'noreg@example.com', password: 'no registrar pw' },
        })
      ).body.token;
      expect(
        (await plain.api('GET', '/api/domains/register/check?domain=example.org', { token: t })).body,
      ).toMatchObject({ configured: false, domain: 'example.org', available: false });
      const reg = await plain.api('POST', '/api/domains/register', {
        token: t,
        body: {
          domain: 'example.org',
          contact: {
            firstName: 'A',
            lastName: 'B',
            email: 'a@example.com',
            phone: '+1.4155550100',
            address: 'x',
            city: 'y',
            zip: '1',
            country: 'US',
          },
        },
      });
      expect(reg).toMatchObject({ status: 503, body: { code: 'registration_unavailable' } });
    } finally {
      await plain.stop();
    }
  });
});
