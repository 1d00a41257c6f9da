import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eq } from 'drizzle-orm';
import { schema } from '../db/index.js';
import { startStack, type TestStack } from './helpers/stack.js';

let stack: TestStack;
let token: string;
let domA: string;
let domB: string;

beforeAll(async () => {
  stack = await startStack({ SERVICE_DOMAIN: 'scoped.svc.test' });
  token = (
    await stack.api('POST', '/api/auth/signup', { body: { email: 'scopes@example.com', password: 'scoped keys pw' } })
  ).body.token;
  domA = (await stack.api('POST', '/api/domains/subdomain', { token, body: { subdomain: 'alpha' } })).body.domain.id;
  domB = (await stack.api('POST', '/api/domains/subdomain', { token, body: { subdomain: 'bravo' } })).body.domain.id;
});
afterAll(async () => {
  await stack?.stop();
});

describe('domain-scoped keys', () => {
  it('creates, lists in full, and limits the key to its one domain', async () => {
    const created = await stack.api('POST', '/api/keys/scoped', {
      token,
      body: { domainId: domA, name: 'alpha sender' },
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      domain_id: domA,
      domain: 'alpha.scoped.svc.test',
      name: 'alpha sender',
      last_used_at: null,
    });
    expect(created.body.id).toMatch(/^key_/);
    expect(created.body.key).toMatch(/^svc_live_/);
    const key = created.body.key as string;
    const list = (await stack.api('GET', '/api/keys/scoped', { token })).body;
    expect(list.find((k: any) => k.id === created.body.id).key).toBe(key);

    const domains = (await stack.api('GET', '/api/domains', { token: key })).body;
    expect(domains.map((d: any) => d.id)).toEqual([domA]);
    expect((await stack.api('GET', `/api/domains/${domA}`, { token: key })).status).toBe(200);
    for (const [method, path] of [
      ['GET', `/api/domains/${domB}`],
      ['POST', `/api/domains/${domB}/verify`],
      ['DELETE', `/api/domains/${domB}`],
    ] as const) {
      const res = await stack.api(method, path, { token: key });
      expect(res, `${method} ${path}`).toMatchObject({ status: 404, body: { code: 'not_found' } });
    }
    expect((await stack.api('GET', '/v1/me', { token: key })).body.sendingDomains).toEqual(['alpha.scoped.svc.test']);
    expect((await stack.api('GET', '/v1/me', { token })).body.sendingDomains).toEqual([
      'alpha.scoped.svc.test',
      'bravo.scoped.svc.test',
    ]);
  });

  it('cannot add domains, manage keys or read the account key', async () => {
    const { key } = (await stack.api('POST', '/api/keys/scoped', { token, body: { domainId: domA } })).body;
    expect((await stack.api('POST', '/api/domains', { token: key, body: { domain: 'new.example.com' } })).status).toBe(
      403,
    );
    expect(
      (await stack.api('POST', '/api/domains/subdomain', { token: key, body: { subdomain: 'charlie' } })).status,
    ).toBe(400);
    expect((await stack.api('GET', '/api/keys', { token: key })).body.code).toBe('wrong_credential');
    expect((await stack.api('GET', '/api/keys/scoped', { token: key })).status).toBe(403);
    expect((await stack.api('POST', '/api/keys/scoped', { token: key, body: { domainId: domA } })).status).toBe(403);
  });

  it('keeps last_used_at and dies at once when revoked', async () => {
    const created = (await stack.api('POST', '/api/keys/scoped', { token, body: { domainId: domB } })).body;
    expect((await stack.api('GET', '/v1/me', { token: created.key })).status).toBe(200);
    const listed = (await stack.api('GET', '/api/keys/scoped', { token })).body.find((k: any) => k.id === created.id);
    expect(listed.last_used_at).toBeGreaterThan(Date.now() - 60_000);
    expect((await stack.api('DELETE', `/api/keys/scoped/${created.id}`, { token })).body).toEqual({ ok: true });
    expect((await stack.api('GET', '/v1/me', { token: created.key })).status).toBe(401);
    expect((await stack.api('DELETE', `/api/keys/scoped/${created.id}`, { token })).status).toBe(404);
  });

  it('refuses a domain of another account as if it did not exist', async () => {
    const other = (
      await stack.api('POST', '/api/auth/signup', {
        body: { email: 'other-scopes@example.com', password: 'other account pw' },
      })
    ).body.token;
    expect((await stack.api('POST', '/api/keys/scoped', { token: other, body: { domainId: domA } })).status).toBe(404);
    expect((await stack.api('GET', `/api/domains/${domA}`, { token: other })).status).toBe(404);
    const mine = (await stack.api('POST', '/api/keys/scoped', { token, body: { domainId: domA } })).body;
    expect((await stack.api('DELETE', `/api/keys/scoped/${mine.id}`, { token: other })).status).toBe(404);
  });

  it('deleting the domain revokes its scoped keys and removes its routes', async () => {
    const dom = (await stack.api('POST', '/api/domains/subdomain', { token, body: { subdomain: 'delta' } })).body.domain
      .id;
    const { key } = (await stack.api('POST', '/api/keys/scoped', { token, body: { domainId: dom } })).body;
    await stack.api('PUT', `/api/domains/${dom}/webhook`, { token, body: { url: 'https://hooks.example.com/delta' } });
    await stack.api('DELETE', `/api/domains/${dom}`, { token });
    expect((await stack.api('GET', '/v1/me', { token: key })).status).toBe(401);
    const [route] = await stack.service.core.db.select().from(schema.routes).where(eq(schema.routes.domainId, dom));
    expect(route).toBeUndefined();
  });
});
