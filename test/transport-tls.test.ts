import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, schema, type Database } from '../db/index.js';
import { parseShaping } from '../core/shaping/config.js';
import type { MtaStsAnswer, MtaStsLookup } from '../core/mta-sts/policy.js';
import { mxTransport, type OutboundTransport, type SendContext } from '../core/transport/transport.js';
import { resolverFor, startTestDns } from './helpers/dns.js';
import { createTestDatabase } from './helpers/pg.js';
import { freePort } from './helpers/ports.js';
import { selfSignedFor, startRecordingMx, type RecordingMx } from './helpers/recording-mx.js';
import { FROM_DOMAIN, startSendingStack, type SendingStack } from './helpers/sending.js';
import { eventually } from './helpers/stack.js';

/**
 * Verified TLS where it is required (docs/egress.md), on the shaped MX path against loopback MXs: one
 * with no STARTTLS, one whose certificate (trusted through trustedCa) names it, one whose trusted
 * certificate names another host. A sending domain with `tls: "enforced"` and an MTA-STS `enforce`
 * policy (a stub lookup) get a verified session or nothing: the MX is never sent a MAIL FROM, the
 * recipient is deferred `tls_required` with the reason. `testing` delivers and notes the failure;
 * a policy still being fetched throttles.
 */
let pg: Awaited<ReturnType<typeof createTestDatabase>>;
let database: Database;
let dns: Awaited<ReturnType<typeof startTestDns>>;
let plain: RecordingMx;
let good: RecordingMx;
let wrong: RecordingMx;
let transport: OutboundTransport;
const certDir = mkdtempSync(join(tmpdir(), 'svc-transport-tls-'));
const policies = new Map<string, MtaStsAnswer>();
const mtaSts: MtaStsLookup = { policyFor: async (domain) => policies.get(domain) ?? { policy: null } };
const policy = (mode: 'enforce' | 'testing', mx: string[]): MtaStsAnswer => ({
  policy: { id: '1', mode, mx, maxAge: 86_400 },
});

beforeAll(async () => {
  pg = await createTestDatabase();
  database = await openDatabase({ databaseUrl: pg.url, dataDir: mkdtempSync(join(tmpdir(), 'svc-tls-db-')) });
  const goodCert = await selfSignedFor(certDir, 'good', ['mx.good.test']);
  const otherCert = await selfSignedFor(certDir, 'other', ['mx.other.test']);
  const port = await freePort();
  plain = await startRecordingMx({ host: '127.0.0.41', port });
  good = await startRecordingMx({ host: '127.0.0.42', port, tls: goodCert });
  wrong = await startRecordingMx({ host: '127.0.0.43', port, tls: otherCert });
  dns = await startTestDns();
  for (const [name, ip] of [
    ['plain', '127.0.0.41'],
    ['good', '127.0.0.42'],
    ['wrong', '127.0.0.43'],
  ] as const) {
    dns.zone.set(`mx.${name}.test`, 'A', [{ value: ip }]);
    // Recipient domains on each MX, one per case so each case has its own site and connections.
    for (const d of [`${name}.test`, `sts-${name}.test`, `testing-${name}.test`])
      dns.zone.set(d, 'MX', [{ value: `mx.${name}.test`, priority: 10 }]);
  }
  transport = mxTransport({
    resolver: resolverFor(dns.server.address),
    port,
    heloName: 'svc.tls.test',
    timeouts: { timeoutMs: 10_000 },
    allowPrivate: true,
    shaping: { db: database.db, config: parseShaping('["default"]\nconnection_limit = 1\n') },
    trustedCa: `${goodCert.cert.toString()}\n${otherCert.cert.toString()}`,
    mtaSts,
  });
});
afterAll(async () => {
  transport?.close();
  for (const mx of [plain, good, wrong]) await mx?.close();
  await dns?.close();
  await database?.close();
  await pg?.drop();
  rmSync(certDir, { recursive: true, force: true });
});

const raw = Buffer.from('Subject: tls\r\n\r\nsecret\r\n');
let n = 0;
const send = (to: string, ctx: SendContext = {}) =>
  transport.send(`msg_tls_${n++}`, { from: 'x@sender.test', to: [to] }, raw, 'tls', ctx);

describe('verified TLS required by the sending domain', () => {
  it('an MX with no STARTTLS is never sent a MAIL FROM: deferred tls_required with the reason', async () => {
    const out = await send('a@plain.test', { tlsRequired: true });
    expect(out).toEqual([
      {
        address: 'a@plain.test',
        status: 'deferred',
        bounceClass: 'tls_required',
        response: 'TLS required by the sending domain: mx.plain.test offers no STARTTLS',
        site: 'mx.plain.test',
        source: 'default',
        pool: 'transactional',
      },
    ]);
    expect(plain.sessions.length).toBeGreaterThan(0);
    expect(plain.mailFroms()).toBe(0);
    expect(plain.copies.size).toBe(0);
  });

  it('an idle connection that is not verified is never taken for such mail', async () => {
    // Opportunistic mail to the same site goes in clear (as before) and leaves its connection idle.
    expect(await send('open@plain.test')).toMatchObject([{ status: 'sent' }]);
    expect(plain.copies.get('open@plain.test')?.count).toBe(1);
    const froms = plain.mailFroms();
    expect(await send('b@plain.test', { tlsRequired: true })).toMatchObject([
      { status: 'deferred', bounceClass: 'tls_required' },
    ]);
    expect(plain.mailFroms()).toBe(froms);
    expect(plain.copies.has('b@plain.test')).toBe(false);
  });

  it('a certificate trusted and valid for the MX name delivers over TLS', async () => {
    expect(await send('c@good.test', { tlsRequired: true })).toMatchObject([{ status: 'sent' }]);
    expect(good.copies.get('c@good.test')?.count).toBe(1);
    expect(good.sessions.filter((s) => s.mailFrom > 0).every((s) => s.secure)).toBe(true);
  });

  it('a trusted certificate for another name is refused before MAIL FROM', async () => {
    const out = await send('d@wrong.test', { tlsRequired: true });
    expect(out).toMatchObject([
      {
        status: 'deferred',
        bounceClass: 'tls_required',
        response: 'TLS required by the sending domain: certificate-host-mismatch at mx.wrong.test',
      },
    ]);
    expect(wrong.sessions.length).toBeGreaterThan(0);
    expect(wrong.mailFroms()).toBe(0);
  });
});

describe('MTA-STS of the recipient domain', () => {
  it('enforce: an MX the policy does not name is not tried; deferred with the reason', async () => {
    policies.set('sts-good.test', policy('enforce', ['mx.elsewhere.test']));
    const before = good.sessions.length;
    const out = await send('e@sts-good.test');
    expect(out).toMatchObject([
      {
        status: 'deferred',
        bounceClass: 'tls_required',
        response:
          "MTA-STS enforce: no MX host of sts-good.test (mx.good.test) matches the policy's mx (mx.elsewhere.test)",
      },
    ]);
    expect(good.sessions.length).toBe(before);
    expect(good.copies.has('e@sts-good.test')).toBe(false);
  });

  it('enforce: an MX with no STARTTLS gets nothing in clear', async () => {
    policies.set('sts-plain.test', policy('enforce', ['*.plain.test']));
    const froms = plain.mailFroms();
    expect(await send('f@sts-plain.test')).toMatchObject([
      {
        status: 'deferred',
        bounceClass: 'tls_required',
        response: 'MTA-STS enforce: mx.plain.test offers no STARTTLS',
      },
    ]);
    expect(plain.mailFroms()).toBe(froms);
    expect(plain.copies.has('f@sts-plain.test')).toBe(false);
  });

  it('enforce: an MX the policy names, with a valid certificate, delivers', async () => {
    policies.set('sts-good.test', policy('enforce', ['mx.good.test']));
    expect(await send('g@sts-good.test')).toMatchObject([{ status: 'sent' }]);
    expect(good.copies.get('g@sts-good.test')?.count).toBe(1);
  });

  it('enforce: a certificate for another name is refused', async () => {
    policies.set('sts-wrong.test', policy('enforce', ['mx.wrong.test']));
    expect(await send('h@sts-wrong.test')).toMatchObject([
      { status: 'deferred', response: 'MTA-STS enforce: certificate-host-mismatch at mx.wrong.test' },
    ]);
    expect(wrong.mailFroms()).toBe(0);
  });

  it('testing: delivered as usual, and the failure is noted on the result', async () => {
    policies.set('testing-plain.test', policy('testing', ['mx.plain.test']));
    policies.set('testing-good.test', policy('testing', ['mx.good.test']));
    expect(await send('i@testing-plain.test')).toMatchObject([
      { status: 'sent', tls: 'MTA-STS testing: mx.plain.test offers no STARTTLS' },
    ]);
    expect(plain.copies.get('i@testing-plain.test')?.count).toBe(1);
    const passed = await send('j@testing-good.test');
    expect(passed).toMatchObject([{ status: 'sent' }]);
    expect((passed as { tls?: string }[])[0]!.tls).toBeUndefined();
  });

  it('a policy still being fetched: throttled with its wait and cause, nothing sent', async () => {
    policies.set('sts-plain.test', {
      pending: true,
      waitMs: 1500,
      cause: 'fetching the MTA-STS policy of sts-plain.test',
    });
    const sessions = plain.sessions.length;
    expect(await send('k@sts-plain.test')).toEqual({
      throttled: true,
      waitMs: 1500,
      cause: 'fetching the MTA-STS policy of sts-plain.test',
    });
    expect(plain.sessions.length).toBe(sessions);
  });
});

describe('a sending domain with tls: "enforced", through the delivery service', () => {
  let env: SendingStack;
  beforeAll(async () => {
    env = await startSendingStack({ env: { OUTBOUND_RETRY_SCHEDULE: '300,300' } });
  }, 120_000);
  afterAll(async () => {
    await env?.stop();
  });

  it('defers with the reason on the trail, then bounces tls_required at the end of the ladder; nothing in clear', async () => {
    const db = env.stack.service.core.db;
    await db.update(schema.domains).set({ tls: 'enforced' }).where(eq(schema.domains.domain, FROM_DOMAIN));
    const res = await env.send({ to: 'secret@rcpt.test' });
    expect(res.status).toBe(200);
    const row = await eventually(async () => {
      const [m] = await db.select().from(schema.messages).where(eq(schema.messages.id, res.body.id));
      return m?.status === 'bounced' ? m : undefined;
    }, 30_000);
    expect(row.recipients?.['secret@rcpt.test']).toMatchObject({ status: 'bounced', bounceClass: 'tls_required' });
    const reason = 'TLS required by the sending domain: sink.rcpt.test offers no STARTTLS';
    expect(row.trail?.map((e) => [e.status, e.response, e.source])).toEqual([
      ['deferred', reason, 'default'],
      ['deferred', reason, 'default'],
      ['bounced', reason, 'default'],
    ]);
    // The sink (no STARTTLS) was connected to, never given the message.
    expect(env.sink.received.some((r) => r.to.includes('secret@rcpt.test'))).toBe(false);
    const view = await env.stack.api('GET', `/api/messages/${res.body.id}`, { token: env.key });
    expect(view.body.message.recipients).toEqual([
      expect.objectContaining({ address: 'secret@rcpt.test', status: 'bounced', bounceClass: 'tls_required' }),
    ]);
  });
});
