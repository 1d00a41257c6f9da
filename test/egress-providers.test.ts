import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp } from '../api/app.js';
import { servicesOf } from '../core/index.js';
import { createEgressRouter } from '../core/egress/router.js';
import { schema } from '../db/index.js';
import { startTestDns } from './helpers/dns.js';
import { apiClient, startStack, type TestStack } from './helpers/stack.js';

const SERVICE = 'mx.svc.test';
const OPERATOR = 'operator-token-egress-0123456789';
const RELAY_PASSWORD = 'relay-secret-never-shown-42';
const EGRESS = `
[source.default]

[source.ip2]
bind_address = "127.0.0.2"
ehlo_name = "mta2.svc.test"

[source.prov]
relay = { host = "smtp.relay.test", port = 2525, security = "starttls", username = "apikey", password_env = "PROV_SMTP_PASSWORD" }
spf_include = "spf.relay.test"
records = [{ type = "CNAME", name = "pr1._domainkey", value = "pr1.dkim.relay.test" }]

[pool.transactional]
label = "Transactional"
sources = [{ name = "default", weight = 1 }]

[pool.bulk]
label = "Broadcasts"
sources = [{ name = "ip2", weight = 2 }, { name = "default", weight = 1 }]

[pool.relay-pool]
label = "Through the relay"
sources = ["prov"]

[streams]
transactional = "transactional"
bulk = "bulk"
`;
const PLANS = {
  free: { includedEmails: 100_000, dailySendCap: 10_000, overage: 'block', paid: false },
  pro: { includedEmails: 100_000, dailySendCap: null, overage: 'metered', paid: true },
};

let stack: TestStack;
let dns: Awaited<ReturnType<typeof startTestDns>>;
let dir: string;
let paid: { token: string; id: string };
let free: { token: string; id: string };

const db = () => stack.service.core.db;
const record = (list: any[], type: string, name: string) => list.find((r) => r.type === type && r.name === name);
const operator = (method: string, path: string, body?: unknown, token = OPERATOR) =>
  stack.api(method, path, { token, ...(body !== undefined ? { body } : {}) });

async function account(email: string, plan: string) {
  const s = (await stack.api('POST', '/api/auth/signup', { body: { email, password: `${email} password` } })).body;
  await db().update(schema.users).set({ plan }).where(eq(schema.users.id, s.user.id));
  return { token: s.token as string, id: s.user.id as string };
}
const add = (who: { token: string }, domain: string, email_provider_id?: string) =>
  stack.api('POST', '/api/domains', {
    token: who.token,
    body: { domain, ...(email_provider_id ? { email_provider_id } : {}) },
  });
const rowOf = async (id: string) => (await db().select().from(schema.domains).where(eq(schema.domains.id, id)))[0]!;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'egress-providers-'));
  writeFileSync(join(dir, 'egress.toml'), EGRESS);
  dns = await startTestDns();
  stack = await startStack({
    DNS_SERVERS: dns.server.address,
    SERVICE_DOMAIN: SERVICE,
    EGRESS_FILE: join(dir, 'egress.toml'),
    PROV_SMTP_PASSWORD: RELAY_PASSWORD,
    PLANS: JSON.stringify(PLANS),
    OPERATOR_TOKEN: OPERATOR,
  });
  paid = await account('paid@example.com', 'pro');
  free = await account('free@example.com', 'free');
});
afterAll(async () => {
  await stack?.stop();
  await dns?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('a domain backed by a pool', () => {
  it("a paid plan's choice of a relay pool: the relay provider, its SPF include merged and its records in dns", async () => {
    const res = await add(paid, 'relayed.example.com', 'relay-pool');
    expect(res.status).toBe(201);
    expect(res.body.domain).toMatchObject({
      provider: 'relay',
      email_provider_id: 'relay-pool',
      tls: 'opportunistic',
    });
    expect(res.body.warnings).toBeUndefined();
    const dnsList = res.body.dns;
    expect(record(dnsList, 'TXT', 'relayed.example.com').value).toBe(
      `v=spf1 include:${SERVICE} include:spf.relay.test ~all`,
    );
    // The return path's SPF too: the relay sends with it as MAIL FROM.
    expect(record(dnsList, 'TXT', 'bounces.relayed.example.com').value).toBe(
      `v=spf1 include:${SERVICE} include:spf.relay.test ~all`,
    );
    expect(record(dnsList, 'CNAME', 'pr1._domainkey.relayed.example.com')).toEqual({
      type: 'CNAME',
      name: 'pr1._domainkey.relayed.example.com',
      value: 'pr1.dkim.relay.test',
    });
    // The domain's own DKIM key is still published.
    expect(record(dnsList, 'TXT', 'svc1._domainkey.relayed.example.com').value).toMatch(/^v=DKIM1;/);
    expect((await rowOf(res.body.domain.id)).egressPinned).toBe(true);

    const got = await stack.api('GET', `/api/domains/${res.body.domain.id}`, { token: paid.token });
    expect(got.body.domain).toMatchObject({ provider: 'relay', email_provider_id: 'relay-pool' });
    expect(got.body.dns).toEqual(dnsList);
  });

  it("a paid plan's choice of a local pool: svc, the built-in records unchanged", async () => {
    const res = await add(paid, 'bulky.example.com', 'bulk');
    expect(res.body.domain).toMatchObject({ provider: 'svc', email_provider_id: 'bulk' });
    expect(record(res.body.dns, 'TXT', 'bulky.example.com').value).toBe(`v=spf1 include:${SERVICE} ~all`);
    expect(res.body.dns.some((r: any) => r.type === 'CNAME')).toBe(false);
  });

  it("a free plan's choice is ignored: the platform default (the transactional pool), not pinned", async () => {
    const res = await add(free, 'free.example.com', 'relay-pool');
    expect(res.status).toBe(201);
    expect(res.body.domain).toMatchObject({ provider: 'svc', email_provider_id: 'transactional' });
    expect(record(res.body.dns, 'TXT', 'free.example.com').value).toBe(`v=spf1 include:${SERVICE} ~all`);
    expect(res.body.dns.some((r: any) => r.type === 'CNAME')).toBe(false);
    expect((await rowOf(res.body.domain.id)).egressPinned).toBe(false);
  });

  it('a paid plan naming no pool of the file: 400 unknown_provider, nothing stored', async () => {
    const res = await add(paid, 'nowhere.example.com', 'svc-mta');
    expect(res).toMatchObject({ status: 400, body: { code: 'unknown_provider' } });
    const rows = await db().select().from(schema.domains).where(eq(schema.domains.domain, 'nowhere.example.com'));
    expect(rows).toEqual([]);
  });

  it('a row from before pools (email_provider_id null) shows the default pool', async () => {
    const id = (await add(free, 'old.example.com')).body.domain.id;
    await db().update(schema.domains).set({ emailProviderId: null }).where(eq(schema.domains.id, id));
    const got = await stack.api('GET', `/api/domains/${id}`, { token: free.token });
    expect(got.body.domain).toMatchObject({ provider: 'svc', email_provider_id: 'transactional' });
    const list = await stack.api('GET', '/api/domains', { token: free.token });
    expect(list.body.find((d: any) => d.id === id).email_provider_id).toBe('transactional');
  });
});

describe("a domain's TLS requirement", () => {
  let mine: string;
  let other: string;
  beforeAll(async () => {
    mine = (await add(paid, 'tls.example.com')).body.domain.id;
    other = (await add(paid, 'tls-other.example.com')).body.domain.id;
  });
  const patch = (id: string, body: unknown, token = paid.token) =>
    stack.api('PATCH', `/api/domains/${id}`, { token, body });

  it('PATCH tls "enforced" is stored and shown; back to "opportunistic"', async () => {
    const res = await patch(mine, { tls: 'enforced' });
    expect(res.status).toBe(200);
    expect(res.body.domain).toMatchObject({ id: mine, tls: 'enforced', email_provider_id: 'transactional' });
    expect((await rowOf(mine)).tls).toBe('enforced');
    expect((await stack.api('GET', `/api/domains/${mine}`, { token: paid.token })).body.domain.tls).toBe('enforced');
    expect((await rowOf(other)).tls).toBe('opportunistic');
    expect((await patch(mine, { tls: 'opportunistic' })).body.domain.tls).toBe('opportunistic');
    expect((await patch(mine, { tls: 'enforced', track_opens: 1 })).body.domain).toMatchObject({
      tls: 'enforced',
      track_opens: 1,
    });
  });

  it('a bad value is 400 JSON and changes nothing', async () => {
    for (const body of [{ tls: 'required' }, { tls: true }, { tls: null }]) {
      const res = await patch(other, body);
      expect(res.status).toBe(400);
      expect(res.headers.get('content-type')).toMatch(/json/);
      expect(res.body.code).toBeTruthy();
    }
    expect((await rowOf(other)).tls).toBe('opportunistic');
  });

  it("a scoped key sets its own domain's; another domain of the account or another tenant is 404", async () => {
    const key = (await stack.api('POST', '/api/keys/scoped', { token: paid.token, body: { domainId: other } })).body
      .key as string;
    expect((await patch(other, { tls: 'enforced' }, key)).body.domain.tls).toBe('enforced');
    expect((await patch(mine, { tls: 'opportunistic' }, key)).status).toBe(404);
    expect((await patch(mine, { tls: 'opportunistic' }, free.token)).status).toBe(404);
    expect((await rowOf(mine)).tls).toBe('enforced');
  });
});

describe('the operator egress routes', () => {
  it('401 for another credential; 404 while OPERATOR_TOKEN is unset', async () => {
    expect((await operator('GET', '/api/operator/egress', undefined, 'wrong')).status).toBe(401);
    expect((await operator('GET', '/api/operator/egress', undefined, paid.token)).status).toBe(401);
    const r = await operator('POST', '/api/operator/egress/assign', { account_id: paid.id, pool: 'bulk' }, 'x');
    expect(r).toMatchObject({ status: 401, body: { code: 'unauthorized' } });
    // The same service with no OPERATOR_TOKEN: the routes are off.
    const core = servicesOf(stack.service.core);
    const app = createApp({ ...core, config: { ...core.config, operatorToken: undefined } });
    const server: Server = await new Promise((ok) => {
      const s = app.listen(0, '127.0.0.1', () => ok(s));
    });
    try {
      const off = apiClient(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
      expect((await off('GET', '/api/operator/egress', { token: OPERATOR })).status).toBe(404);
      const post = await off('POST', '/api/operator/egress/assign', {
        token: OPERATOR,
        body: { account_id: paid.id, pool: 'bulk' },
      });
      expect(post).toMatchObject({ status: 404, body: { code: 'not_found' } });
    } finally {
      await new Promise((ok) => server.close(ok));
    }
    expect(await db().select().from(schema.egressAssignments)).toEqual([]);
  });

  it('GET shows sources (no relay password), pools with their type, the streams', async () => {
    const res = await operator('GET', '/api/operator/egress');
    expect(res.status).toBe(200);
    expect(JSON.stringify(res.body)).not.toContain(RELAY_PASSWORD);
    expect(res.body.sources).toEqual([
      { name: 'default', bind_address: null, ehlo_name: null, relay: null, suspended: [] },
      { name: 'ip2', bind_address: '127.0.0.2', ehlo_name: 'mta2.svc.test', relay: null, suspended: [] },
      {
        name: 'prov',
        bind_address: null,
        ehlo_name: null,
        relay: { host: 'smtp.relay.test', port: 2525, security: 'starttls' },
        suspended: [],
      },
    ]);
    expect(res.body.pools).toEqual([
      { name: 'transactional', label: 'Transactional', type: 'svc', sources: [{ name: 'default', weight: 1 }] },
      {
        name: 'bulk',
        label: 'Broadcasts',
        type: 'svc',
        sources: [
          { name: 'ip2', weight: 2 },
          { name: 'default', weight: 1 },
        ],
      },
      { name: 'relay-pool', label: 'Through the relay', type: 'relay', sources: [{ name: 'prov', weight: 1 }] },
    ]);
    expect(res.body.streams).toEqual({ transactional: 'transactional', bulk: 'bulk' });
    expect(res.body.assignments).toEqual([]);
    // The paid account's relay domain and bulk domain are pinned (its choice); the free one is not.
    expect(res.body.domains.map((d: any) => [d.domain, d.pool, d.account_id])).toEqual([
      ['bulky.example.com', 'bulk', paid.id],
      ['relayed.example.com', 'relay-pool', paid.id],
    ]);
  });

  it("an account's assignment routes its mail (this process at once, a fresh router too) and is removed with null", async () => {
    const inProcess = stack.service.core.egressRouter;
    expect(await inProcess.poolFor({ userId: free.id, stream: 'bulk' })).toBe('bulk'); // now cached
    const res = await operator('POST', '/api/operator/egress/assign', {
      account_id: free.id,
      stream: 'bulk',
      pool: 'relay-pool',
    });
    expect(res).toMatchObject({
      status: 200,
      body: { ok: true, account_id: free.id, stream: 'bulk', pool: 'relay-pool' },
    });
    expect(await inProcess.poolFor({ userId: free.id, stream: 'bulk' })).toBe('relay-pool');
    const fresh = createEgressRouter({ db: db(), config: stack.config.egress });
    expect(await fresh.poolFor({ userId: free.id, stream: 'bulk' })).toBe('relay-pool');
    expect(await fresh.poolFor({ userId: free.id, stream: 'transactional' })).toBe('transactional');
    expect(await fresh.poolFor({ userId: paid.id, stream: 'bulk' })).toBe('bulk');

    // No stream: all of the account's mail.
    expect((await operator('POST', '/api/operator/egress/assign', { account_id: paid.id, pool: 'bulk' })).body).toEqual(
      { ok: true, account_id: paid.id, stream: 'all', pool: 'bulk' },
    );
    expect(await inProcess.poolFor({ userId: paid.id, stream: 'transactional' })).toBe('bulk');
    const view = await operator('GET', '/api/operator/egress');
    expect(view.body.assignments).toEqual([
      { account_id: free.id, email: 'free@example.com', stream: 'bulk', pool: 'relay-pool' },
      { account_id: paid.id, email: 'paid@example.com', stream: 'all', pool: 'bulk' },
    ]);

    await operator('POST', '/api/operator/egress/assign', { account_id: free.id, stream: 'bulk', pool: null });
    await operator('POST', '/api/operator/egress/assign', { account_id: paid.id, pool: null });
    expect((await operator('GET', '/api/operator/egress')).body.assignments).toEqual([]);
    expect(await inProcess.poolFor({ userId: free.id, stream: 'bulk' })).toBe('bulk');
    expect(await inProcess.poolFor({ userId: paid.id, stream: 'transactional' })).toBe('transactional');
  });

  it("a domain's assignment pins it (provider, records, routing); null returns it to the default, unpinned", async () => {
    const created = await add(free, 'assigned.example.com');
    const id = created.body.domain.id as string;
    const res = await operator('POST', '/api/operator/egress/assign', { domain_id: id, pool: 'relay-pool' });
    expect(res.body).toEqual({ ok: true, domain_id: id, pool: 'relay-pool', provider: 'relay', pinned: true });
    const got = await stack.api('GET', `/api/domains/${id}`, { token: free.token });
    expect(got.body.domain).toMatchObject({ provider: 'relay', email_provider_id: 'relay-pool' });
    expect(record(got.body.dns, 'CNAME', 'pr1._domainkey.assigned.example.com')).toBeTruthy();
    const row = await rowOf(id);
    expect(row.egressPinned).toBe(true);
    const router = createEgressRouter({ db: db(), config: stack.config.egress });
    expect(await router.poolFor({ userId: free.id, stream: 'bulk', domainPool: row.emailProviderId })).toBe(
      'relay-pool',
    );
    const pinned = (await operator('GET', '/api/operator/egress')).body.domains;
    expect(pinned).toContainEqual({ id, domain: 'assigned.example.com', account_id: free.id, pool: 'relay-pool' });

    const back = await operator('POST', '/api/operator/egress/assign', { domain_id: id, pool: null });
    expect(back.body).toEqual({ ok: true, domain_id: id, pool: 'transactional', provider: 'svc', pinned: false });
    expect(await rowOf(id)).toMatchObject({ emailProviderId: 'transactional', provider: 'svc', egressPinned: false });
    expect((await operator('GET', '/api/operator/egress')).body.domains.some((d: any) => d.id === id)).toBe(false);
  });

  it("a hosted domain's zone follows its assignment", async () => {
    const claimed = await stack.api('POST', '/api/domains/subdomain', {
      token: free.token,
      body: { subdomain: 'hostedrelay' },
    });
    expect(claimed.status).toBe(201);
    const { id, domain } = claimed.body.domain;
    const cname = () => stack.service.core.hosted.lookup(`pr1._domainkey.${domain}`, 'CNAME');
    expect((await cname()).records).toEqual([]);
    await operator('POST', '/api/operator/egress/assign', { domain_id: id, pool: 'relay-pool' });
    expect((await cname()).records).toMatchObject([{ type: 'CNAME', value: 'pr1.dkim.relay.test' }]);
    const spf = (await stack.service.core.hosted.lookup(domain, 'TXT')).records.map((r) => r.value);
    expect(spf).toContain(`v=spf1 include:${SERVICE} include:spf.relay.test ~all`);
  });

  it('unknown pool 400, unknown account or domain 404, a bad body 400: all JSON', async () => {
    const cases: [unknown, number, string][] = [
      [{ account_id: paid.id, pool: 'nope' }, 400, 'unknown_pool'],
      [{ domain_id: 'dom_x', pool: 'nope' }, 400, 'unknown_pool'],
      [{ account_id: 'usr_missing', pool: 'bulk' }, 404, 'not_found'],
      [{ domain_id: 'dom_missing', pool: 'bulk' }, 404, 'not_found'],
      [{}, 400, 'validation_error'],
      [{ account_id: paid.id }, 400, 'validation_error'],
      [{ account_id: paid.id, stream: 'newsletters', pool: 'bulk' }, 400, 'validation_error'],
      [{ account_id: paid.id, domain_id: 'dom_x', pool: 'bulk' }, 400, 'validation_error'],
      [{ domain_id: 'dom_x', pool: 7 }, 400, 'validation_error'],
    ];
    for (const [body, status, code] of cases) {
      const res = await operator('POST', '/api/operator/egress/assign', body);
      expect([JSON.stringify(body), res.status, res.body?.code]).toEqual([JSON.stringify(body), status, code]);
      expect(res.headers.get('content-type')).toMatch(/json/);
    }
    expect(await db().select().from(schema.egressAssignments)).toEqual([]);
  });
});

describe('warnings about the pool', () => {
  it('a source of the pool suspended at a site: POST and GET say which, how many sites, until when', async () => {
    const until = Date.now() + 3_600_000;
    const now = Date.now();
    const site = (key: string, suspendedUntil: number | null) => ({
      site: key,
      msgTokens: 1,
      msgAt: now,
      connTokens: 1,
      connAt: now,
      suspendedUntil,
      suspendCause: suspendedUntil ? '421 4.7.28 rate limited' : null,
      updatedAt: now,
    });
    await db()
      .insert(schema.shapingSites)
      .values([
        site('prov|mx.big.test', until),
        site('prov|mx.other.test', until - 1000),
        site('prov|mx.over.test', now - 1000), // a suspension that ended
        site('ip2|mx.big.test', until),
      ]);
    const res = await add(paid, 'warned.example.com', 'relay-pool');
    expect(res.status).toBe(201);
    expect(res.body.warnings).toHaveLength(1);
    expect(res.body.warnings[0]).toContain('"prov"');
    expect(res.body.warnings[0]).toContain('2 site(s)');
    expect(res.body.warnings[0]).toContain(new Date(until).toISOString());
    const got = await stack.api('GET', `/api/domains/${res.body.domain.id}`, { token: paid.token });
    expect(got.body.warnings).toEqual(res.body.warnings);

    // The transactional pool's one source (default, bare site keys) is not suspended anywhere: no warnings.
    const clean = await add(paid, 'clean.example.com');
    expect(clean.body.warnings).toBeUndefined();
    // The bulk pool has ip2, suspended at one site.
    const bulk = await add(paid, 'bulkwarn.example.com', 'bulk');
    expect(bulk.body.warnings).toEqual([expect.stringContaining('"ip2"')]);

    // The default source is suspended under the bare site key.
    await db().insert(schema.shapingSites).values(site('mx.big.test', until));
    const again = await stack.api('GET', `/api/domains/${clean.body.domain.id}`, { token: paid.token });
    expect(again.body.warnings).toEqual([expect.stringMatching(/"default".*1 site\(s\) \(mx\.big\.test\)/)]);

    const view = (await operator('GET', '/api/operator/egress')).body;
    expect(view.sources.find((s: any) => s.name === 'prov').suspended).toEqual([
      { site: 'mx.big.test', until, cause: '421 4.7.28 rate limited' },
      { site: 'mx.other.test', until: until - 1000, cause: '421 4.7.28 rate limited' },
    ]);
    expect(view.sources.find((s: any) => s.name === 'default').suspended).toEqual([
      { site: 'mx.big.test', until, cause: '421 4.7.28 rate limited' },
    ]);
  });

  it('a pool no longer in the file', async () => {
    const id = (await add(paid, 'orphan.example.com')).body.domain.id;
    await db().update(schema.domains).set({ emailProviderId: 'retired' }).where(eq(schema.domains.id, id));
    const got = await stack.api('GET', `/api/domains/${id}`, { token: paid.token });
    expect(got.body.warnings).toEqual([expect.stringContaining('"retired" is no longer in the egress file')]);
  });
});
