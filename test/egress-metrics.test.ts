import type { AddressInfo } from 'node:net';
import { eq } from 'drizzle-orm';
import express from 'express';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mountEgressOutcomes } from '../api/egress-outcomes.js';
import { createEgressCounter } from '../core/egress/counters.js';
import type { RecipientResult } from '../core/mail/recipients.js';
import { instrumentTransport } from '../core/transport/instrumented.js';
import type { OutboundTransport, SendContext } from '../core/transport/transport.js';
import { schema } from '../db/index.js';
import { metric, scrape, type Scrape } from './helpers/metrics.js';
import { FROM_DOMAIN, startSendingStack, type SendingStack } from './helpers/sending.js';
import type { TestStack } from './helpers/stack.js';

/**
 * Outcomes by egress source and pool: results the transport answers (with their source and pool) go through
 * instrumentTransport into Prometheus and into egress_counters (one upsert per flush); GET /api/metrics/egress
 * answers an account's (or one domain's) sums, GET /api/operator/egress/outcomes every account's.
 */
const OPERATOR_TOKEN = 'egress-metrics-operator-token-0123456789';
let env: SendingStack;
let stack: TestStack;
let userId: string;
let acmeId: string;
let betaId: string;
let betaKey: string;
let otherUserId: string;
let otherDomainId: string;
let otherSession: string;
let before: Scrape;
const prometheus = () => scrape(`${stack.baseUrl}/metrics`, OPERATOR_TOKEN);

type Outcome = Pick<RecipientResult, 'status' | 'source' | 'pool'>;
/** A transport whose next transaction answers `outcomes`, one recipient each: what mxTransport answers, minus SMTP. */
function scripted(): OutboundTransport & { next: Outcome[] } {
  const t = {
    next: [] as Outcome[],
    group: (to: string[]) => [to],
    close: () => undefined,
    async send(_id: string, envelope: { to: string[] }): Promise<RecipientResult[]> {
      return envelope.to.map((address, i) => ({ address, response: '250 ok', ...t.next[i]! }));
    },
  };
  return t;
}
const sent = (source: string | undefined, pool: string | undefined, n = 1): Outcome[] =>
  Array.from({ length: n }, () => ({ status: 'sent' as const, source, pool }));

beforeAll(async () => {
  env = await startSendingStack({ env: { OPERATOR_TOKEN }, roles: ['api'] });
  stack = env.stack;
  const db = stack.service.core.db;
  const acme = (await db.select().from(schema.domains).where(eq(schema.domains.domain, FROM_DOMAIN)))[0]!;
  acmeId = acme.id;
  userId = acme.userId;
  betaId = (await stack.api('POST', '/api/domains/subdomain', { token: env.session, body: { subdomain: 'beta' } })).body
    .domain.id;
  betaKey = (await stack.api('POST', '/api/keys/scoped', { token: env.session, body: { domainId: betaId } })).body.key;
  const other = (
    await stack.api('POST', '/api/auth/signup', { body: { email: 'other@example.com', password: 'other password' } })
  ).body;
  otherSession = other.token;
  otherUserId = other.user.id;
  await db.update(schema.users).set({ emailVerified: true }).where(eq(schema.users.id, otherUserId));
  otherDomainId = (
    await stack.api('POST', '/api/domains/subdomain', { token: otherSession, body: { subdomain: 'other' } })
  ).body.domain.id;
  before = await prometheus();
});
afterAll(async () => {
  await env?.stop();
});

describe('outcomes by egress source and pool', () => {
  it('counts each result by source and pool, per account and domain, in one upsert per flush', async () => {
    const db = stack.service.core.db;
    const counter = createEgressCounter({ db, flushMs: 3_600_000 });
    const inner = scripted();
    const transport = instrumentTransport(inner, counter);
    const send = async (owner: SendContext['owner'], outcomes: Outcome[]) => {
      inner.next = outcomes;
      const to = outcomes.map((_, i) => `r${i}@rcpt.test`);
      await transport.send('msg', { from: `a@${FROM_DOMAIN}`, to }, Buffer.from(''), null, { owner });
    };
    const acme = { userId, domainId: acmeId };
    await send(acme, [...sent('ip2', 'bulk', 2), { status: 'deferred', source: 'ip3', pool: 'bulk' }]);
    await send(acme, [{ status: 'bounced', source: 'ip2', pool: 'transactional' }]);
    await send({ userId, domainId: betaId }, sent('ip3', 'transactional'));
    await send({ userId: otherUserId, domainId: otherDomainId }, sent('ip2', 'bulk', 3));
    await send({ userId: null, domainId: null }, sent('default', 'transactional')); // system mail
    await send(acme, sent(undefined, undefined, 4)); // capture mode: no source, not counted by source
    // Nothing is written until the flush; then one row per (account, domain, source, pool, hour).
    expect(await db.select().from(schema.egressCounters)).toEqual([]);
    await counter.flush();
    const rows = await db.select().from(schema.egressCounters);
    expect(rows).toHaveLength(6);
    expect(rows.find((r) => r.userId === '' && r.domainId === '')).toMatchObject({ source: 'default', sent: 1 });
    // A second flush adds to the same rows.
    await send(acme, sent('ip2', 'bulk'));
    await counter.close();
    const acmeBulk = await db.select().from(schema.egressCounters).where(eq(schema.egressCounters.domainId, acmeId));
    expect(acmeBulk.find((r) => r.source === 'ip2' && r.pool === 'bulk')).toMatchObject({ sent: 3, deferred: 0 });
    expect(await db.select().from(schema.egressCounters)).toHaveLength(6);

    // Prometheus: by source, pool and result only (no account, no domain label); capture mode not counted.
    const after = await prometheus();
    const delta = (labels: Record<string, string>) =>
      metric(after, 'svc_egress_results_total', labels) - metric(before, 'svc_egress_results_total', labels);
    expect(delta({ source: 'ip2', pool: 'bulk', result: 'sent' })).toBe(6);
    expect(delta({ source: 'ip3', pool: 'bulk', result: 'deferred' })).toBe(1);
    expect(delta({ source: 'ip2', pool: 'transactional', result: 'bounced' })).toBe(1);
    expect(delta({})).toBe(10); // the 4 capture-mode recipients are not in it
    const series = [...after.keys()].filter((k) => k.startsWith('svc_egress_results_total{'));
    expect(series.length).toBeGreaterThan(0);
    for (const s of series)
      expect(s).toMatch(/^svc_egress_results_total\{source="[^"]*",pool="[^"]*",result="[^"]*"\}$/);
  });

  it("GET /api/metrics/egress answers the account's sums, one domain's, and a scoped key's own only", async () => {
    const get = (query: string, token = env.session) => stack.api('GET', `/api/metrics/egress${query}`, { token });
    const account = await get('');
    expect(account.status, JSON.stringify(account.body)).toBe(200);
    expect(account.body).toMatchObject({
      domain_id: null,
      rows: [
        { source: 'ip2', pool: 'bulk', sent: 3, deferred: 0, bounced: 0 },
        { source: 'ip2', pool: 'transactional', sent: 0, deferred: 0, bounced: 1 },
        { source: 'ip3', pool: 'bulk', sent: 0, deferred: 1, bounced: 0 },
        { source: 'ip3', pool: 'transactional', sent: 1, deferred: 0, bounced: 0 },
      ],
      totals: { sent: 4, deferred: 1, bounced: 1 },
    });
    expect(account.body.to - account.body.from).toBe(24 * 3_600_000);

    const acme = await get(`?domain_id=${acmeId}`);
    expect(acme.body).toMatchObject({ domain_id: acmeId, totals: { sent: 3, deferred: 1, bounced: 1 } });
    const scoped = await get('', betaKey);
    expect(scoped.body).toMatchObject({
      domain_id: betaId,
      rows: [{ source: 'ip3', pool: 'transactional', sent: 1 }],
      totals: { sent: 1, deferred: 0, bounced: 0 },
    });
    expect((await get(`?domain_id=${acmeId}`, betaKey)).status).toBe(404);

    // Another tenant sees its own mail only, and none of this account's domains.
    const other = await get('', otherSession);
    expect(other.body).toMatchObject({ rows: [{ source: 'ip2', pool: 'bulk', sent: 3 }], totals: { sent: 3 } });
    expect((await get(`?domain_id=${acmeId}`, otherSession)).status).toBe(404);

    // A range before the counts holds none; a reversed range is refused.
    const now = Date.now();
    const past = await get(`?from=${now - 72 * 3_600_000}&to=${now - 48 * 3_600_000}`);
    expect(past.body).toMatchObject({ rows: [], totals: { sent: 0, deferred: 0, bounced: 0 } });
    expect((await get(`?from=${now}&to=${now - 3 * 3_600_000}`)).status).toBe(400);
    expect((await stack.api('GET', '/api/metrics/egress')).status).toBe(401);
  });

  it('GET /api/operator/egress/outcomes sums every account and system mail; 401 without the token', async () => {
    const path = '/api/operator/egress/outcomes';
    const all = await stack.api('GET', `${path}?hours=24`, { token: OPERATOR_TOKEN });
    expect(all.status, JSON.stringify(all.body)).toBe(200);
    expect(all.body).toMatchObject({
      hours: 24,
      rows: [
        { source: 'default', pool: 'transactional', sent: 1 },
        { source: 'ip2', pool: 'bulk', sent: 6 },
        { source: 'ip2', pool: 'transactional', bounced: 1 },
        { source: 'ip3', pool: 'bulk', deferred: 1 },
        { source: 'ip3', pool: 'transactional', sent: 1 },
      ],
      totals: { sent: 8, deferred: 1, bounced: 1 },
    });
    expect((await stack.api('GET', path, { token: OPERATOR_TOKEN })).body.hours).toBe(24);
    expect((await stack.api('GET', `${path}?hours=0`, { token: OPERATOR_TOKEN })).status).toBe(400);
    expect((await stack.api('GET', `${path}?hours=abc`, { token: OPERATOR_TOKEN })).status).toBe(400);
    expect((await stack.api('GET', path)).status).toBe(401);
    expect((await stack.api('GET', path, { token: env.session })).status).toBe(401);
    expect((await stack.api('GET', path, { token: env.key })).status).toBe(401);
  });

  it('GET /api/operator/egress/outcomes is 404 while OPERATOR_TOKEN is unset', async () => {
    const app = express();
    mountEgressOutcomes(app, {
      config: { ...stack.config, operatorToken: undefined },
      egressOutcomes: stack.service.core.egressOutcomes,
    });
    const server = app.listen(0, '127.0.0.1');
    await new Promise<void>((r) => server.once('listening', r));
    try {
      const res = await fetch(
        `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/operator/egress/outcomes`,
        {
          headers: { authorization: `Bearer ${OPERATOR_TOKEN}` },
        },
      );
      expect(res.status).toBe(404);
      expect(await res.json()).toMatchObject({ code: 'not_found' });
    } finally {
      await new Promise((r) => server.close(r));
    }
  });
});
