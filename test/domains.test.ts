import { createPublicKey } from 'node:crypto';
import type { Client } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyDomainWorkflowId } from '../workflows/ids.js';
import { SvcDomainStatus } from '../workflows/search-attributes.js';
import { publishOwnMx, startTestDns } from './helpers/dns.js';
import { eventually, startStack, type TestStack } from './helpers/stack.js';

const SERVICE = 'mx.svc.test';
let stack: TestStack;
let dns: Awaited<ReturnType<typeof startTestDns>>;
let token: string;

beforeAll(async () => {
  dns = await startTestDns();
  stack = await startStack({
    DNS_SERVERS: dns.server.address,
    SERVICE_DOMAIN: SERVICE,
    DOMAIN_VERIFY_INITIAL_MS: '300',
    DOMAIN_VERIFY_MAX_MS: '1000',
    DOMAIN_VERIFY_DEADLINE_MS: '6000',
  });
  token = (
    await stack.api('POST', '/api/auth/signup', { body: { email: 'owner@example.com', password: 'domain owner pw' } })
  ).body.token;
});
afterAll(async () => {
  await stack?.stop();
  await dns?.close();
});

const add = (domain: string, t = token) => stack.api('POST', '/api/domains', { token: t, body: { domain } });
const get = (id: string, t = token) => stack.api('GET', `/api/domains/${id}`, { token: t });
const record = (dnsList: { type: string; name: string }[], type: string, name: string) =>
  dnsList.find((r) => r.type === type && r.name === name) as any;

/** Publishes in the test DNS what the service asked for (all of it, or the chosen kinds). */
function publish(domain: string, dnsList: any[], kinds: ('mx' | 'spf' | 'dkim' | 'dmarc')[]) {
  for (const kind of kinds) {
    if (kind === 'mx') publishOwnMx(dns.zone, domain, dnsList);
    if (kind === 'spf') dns.zone.set(domain, 'TXT', [{ value: record(dnsList, 'TXT', domain).value }]);
    if (kind === 'dkim')
      dns.zone.set(`svc1._domainkey.${domain}`, 'TXT', [
        { value: record(dnsList, 'TXT', `svc1._domainkey.${domain}`).value },
      ]);
    if (kind === 'dmarc') dns.zone.set(`_dmarc.${domain}`, 'TXT', [{ value: 'v=DMARC1; p=none' }]);
  }
}

describe('adding a domain', () => {
  it('normalizes the name and answers the records to publish, with a 2048-bit DKIM key', async () => {
    const res = await add('  Shop.Example.COM. ');
    expect(res.status).toBe(201);
    const { domain, dns: records } = res.body;
    expect(domain).toMatchObject({
      domain: 'shop.example.com',
      status: 'pending',
      mx_verified: 0,
      provider: 'svc',
      // The platform default: the transactional stream's pool of the shipped egress.toml.
      email_provider_id: 'transactional',
      tls: 'opportunistic',
    });
    expect(domain.id).toMatch(/^dom_/);
    expect(JSON.stringify(domain)).not.toMatch(/PRIVATE|dkim_private/i);
    // The row's own MX host: only this account's row is verified by it.
    expect(record(records, 'MX', 'shop.example.com')).toMatchObject({
      value: expect.stringMatching(/^[0-9a-f]{20}\.mx\.mx\.svc\.test$/),
      priority: 10,
    });
    expect(records.some((r: any) => r.name.startsWith('_svc-verify.'))).toBe(false);
    expect(record(records, 'TXT', 'shop.example.com').value).toBe(`v=spf1 include:${SERVICE} ~all`);
    expect(record(records, 'TXT', '_dmarc.shop.example.com').value).toMatch(/^v=DMARC1;/);
    expect(record(records, 'MX', 'bounces.shop.example.com')).toMatchObject({ value: SERVICE });
    const dkim = record(records, 'TXT', 'svc1._domainkey.shop.example.com').value as string;
    const p = /p=([A-Za-z0-9+/=]+)/.exec(dkim)![1]!;
    const key = createPublicKey({ key: Buffer.from(p, 'base64'), format: 'der', type: 'spki' });
    expect(key.asymmetricKeyType).toBe('rsa');
    expect(key.asymmetricKeyDetails!.modulusLength).toBe(2048);
  });

  it.each([
    ['192.168.1.10', 'invalid_domain'],
    ['[::1]', 'invalid_domain'],
    ['localhost', 'invalid_domain'],
    ['exa mple.com', 'invalid_domain'],
    ['-bad-.com', 'invalid_domain'],
    [`x.${SERVICE}`, 'reserved_domain'],
    [SERVICE, 'reserved_domain'],
  ])('rejects %s with %s', async (name, code) => {
    const res = await add(name);
    expect(res.status).toBe(400);
    expect(res.body.code).toBe(code);
  });

  it('refuses a duplicate on the account, and a domain another account holds verified', async () => {
    expect((await add('shop.example.com')).body.code).toBe('domain_exists');
    const other = (
      await stack.api('POST', '/api/auth/signup', { body: { email: 'rival@example.com', password: 'rival password' } })
    ).body.token;
    const mine = await add('held.example.com');
    publish('held.example.com', mine.body.dns, ['mx']);
    await stack.api('POST', `/api/domains/${mine.body.domain.id}/verify`, { token });
    const theirs = await add('held.example.com', other);
    expect(theirs).toMatchObject({ status: 409, body: { code: 'domain_taken' } });
  });

  it('pins a free plan that passes email_provider_id to the platform default (SPEC.md), not refused', async () => {
    const res = await stack.api('POST', '/api/domains', {
      token,
      body: { domain: 'pick.example.com', email_provider_id: 'someone-elses-provider' },
    });
    expect(res.status).toBe(201);
    expect(res.body.domain).toMatchObject({
      domain: 'pick.example.com',
      provider: 'svc',
      email_provider_id: 'transactional',
    });
  });
});

describe('verification', () => {
  it('the loop finds the records on its own: MX verifies, SPF + DKIM enable sending, all four end the workflow', async () => {
    const res = await add('loop.example.com');
    const id = res.body.domain.id;
    publish('loop.example.com', res.body.dns, ['mx']);
    const verified = await eventually(async () => {
      const d = (await get(id)).body.domain;
      return d.status === 'verified' ? d : undefined;
    });
    expect(verified).toMatchObject({ mx_verified: 1, spf_verified: 0, dkim_verified: 0, dmarc_verified: 0 });
    expect((await stack.api('GET', '/v1/me', { token })).body.sendingDomains).not.toContain('loop.example.com');

    publish('loop.example.com', res.body.dns, ['spf', 'dkim']);
    await eventually(async () => (await get(id)).body.domain.dkim_verified === 1);
    expect((await get(id)).body.domain.spf_verified).toBe(1);
    expect((await stack.api('GET', '/v1/me', { token })).body.sendingDomains).toContain('loop.example.com');

    publish('loop.example.com', res.body.dns, ['dmarc']);
    const client = await temporalClient();
    const result = await client.workflow.getHandle(verifyDomainWorkflowId(id)).result();
    expect(result).toMatchObject({ outcome: 'verified', checks: { mx: true, spf: true, dkim: true, dmarc: true } });
    const desc = await client.workflow.getHandle(verifyDomainWorkflowId(id)).describe();
    expect(desc.typedSearchAttributes.get(SvcDomainStatus)).toBe('verified');
    expect((await get(id)).body.domain.dmarc_verified).toBe(1);
  });

  it('a domain whose records never appear stays pending, and its loop ends at the deadline', async () => {
    const res = await add('never.example.com');
    const result = await (
      await temporalClient()
    ).workflow
      .getHandle(verifyDomainWorkflowId(res.body.domain.id))
      .result();
    expect(result).toMatchObject({ outcome: 'timed_out', status: 'pending' });
    expect((await get(res.body.domain.id)).body.domain.status).toBe('pending');
  });

  it('verify-now answers the SPEC.md shape, each check following its record', async () => {
    const res = await add('now.example.com');
    const id = res.body.domain.id;
    const first = await stack.api('POST', `/api/domains/${id}/verify`, { token });
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({
      status: 'pending',
      checks: { mx: false, spf: false, dkim: false, dmarc: false, ownership: false },
      sending: { ok: false },
    });
    expect(first.body.checkedAt).toBeGreaterThan(Date.now() - 10_000);
    publish('now.example.com', res.body.dns, ['dmarc']);
    expect((await stack.api('POST', `/api/domains/${id}/verify`, { token })).body.checks).toEqual({
      mx: false,
      spf: false,
      dkim: false,
      dmarc: true,
      ownership: false,
    });
    publish('now.example.com', res.body.dns, ['spf', 'dkim']);
    const second = (await stack.api('POST', `/api/domains/${id}/verify`, { token })).body;
    expect(second).toMatchObject({
      status: 'pending',
      checks: { mx: false, spf: true, dkim: true, dmarc: true },
      sending: { ok: true, enabled: true, dkimVerified: true, providerId: 'transactional' },
    });
    publish('now.example.com', res.body.dns, ['mx']);
    const third = (await stack.api('POST', `/api/domains/${id}/verify`, { token })).body;
    expect(third).toMatchObject({
      status: 'verified',
      checks: { mx: true, spf: true, dkim: true, dmarc: true, ownership: true },
      sending: { ok: true, alreadyEnabled: true },
    });
    dns.zone.set('now.example.com', 'TXT', [{ value: 'v=spf1 -all' }]);
    expect((await stack.api('POST', `/api/domains/${id}/verify`, { token })).body.checks.spf).toBe(false);
  });
});

describe('list, detail and delete', () => {
  it('lists with enrichment, reads one, and deletes with a cleanup report', async () => {
    const res = await add('gone.example.com');
    const id = res.body.domain.id;
    const list = (await stack.api('GET', '/api/domains', { token })).body;
    const item = list.find((d: any) => d.id === id);
    expect(item).toMatchObject({
      webhookUrl: null,
      webhookAckMode: null,
      webhookStatus: null,
      dailyLimitReached: false,
    });
    expect((await get(id)).body.dns.length).toBeGreaterThan(0);
    const del = await stack.api('DELETE', `/api/domains/${id}`, { token });
    expect(del.body).toEqual({ ok: true, cleanup: { deregistered: ['svc'], dnsDeleted: 0, warnings: [] } });
    expect((await get(id)).status).toBe(404);
    const client = await temporalClient();
    const desc = await client.workflow.getHandle(verifyDomainWorkflowId(id)).describe();
    expect(desc.status.name).toBe('TERMINATED');
    expect((await stack.api('DELETE', `/api/domains/${id}`, { token })).status).toBe(404);
    expect((await stack.api('GET', '/api/domains/not-an-id', { token })).status).toBe(400);
  });
});

let client: Client | undefined;
async function temporalClient() {
  if (!client) {
    const { connectTemporal } = await import('../temporal/client.js');
    client = (
      await connectTemporal({
        address: stack.service.temporalAddress,
        namespace: 'default',
        taskQueue: stack.config.temporal.taskQueue,
      })
    ).client;
  }
  return client;
}
