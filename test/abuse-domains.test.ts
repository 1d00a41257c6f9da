import { eq } from 'drizzle-orm';
import nodemailer from 'nodemailer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDnsServer, type DnsServer } from '../dns/server.js';
import { createStaticZone } from '../dns/static-zone.js';
import { schema } from '../db/index.js';
import { publishOwnership } from './helpers/dns.js';
import { startStack, type TestStack } from './helpers/stack.js';
import { rawSmtp } from './helpers/smtp-client.js';

/** Domain ownership: the squatting scenario, DNS failures, and one verified holder per domain. */
const SERVICE = 'own.svc.test';
let stack: TestStack;
let dns: DnsServer;
const zone = createStaticZone();
const failing = new Set<string>();
let owner: string;
let squatter: string;

beforeAll(async () => {
  // The customer's DNS host; a name in `failing` answers SERVFAIL (an outage, not an answer).
  dns = await startDnsServer({
    port: 0,
    lookup: async (name, type) => {
      if ([...failing].some((f) => name === f || name.endsWith(`.${f}`))) throw new Error('outage');
      return zone.lookup(name, type);
    },
  });
  stack = await startStack({ SERVICE_DOMAIN: SERVICE, DNS_SERVERS: dns.address, DOMAIN_VERIFY_INITIAL_MS: '600000' });
  owner = (await stack.api('POST', '/api/auth/signup', { body: { email: 'owner@corp.example', password: 'owner password' } })).body.token;
  squatter = (await stack.api('POST', '/api/auth/signup', { body: { email: 'squatter@example.com', password: 'squatter password' } })).body.token;
});
afterAll(async () => {
  await stack?.stop();
  await dns?.close();
});

const add = (domain: string, t: string) => stack.api('POST', '/api/domains', { token: t, body: { domain } });
const verify = (id: string, t: string) => stack.api('POST', `/api/domains/${id}/verify`, { token: t });
const rcpt = async (address: string) => {
  const c = await rawSmtp(stack.service.smtpPort!);
  await c.command('EHLO test.example');
  await c.command('MAIL FROM:<a@far.example>');
  const r = await c.command(`RCPT TO:<${address}>`);
  c.close();
  return r.code;
};
const messagesOf = async (t: string) => (await stack.api('GET', '/api/messages', { token: t })).body as any[];

describe('the squatting scenario', () => {
  it("a second account that adds the owner's domain first never takes its mail", async () => {
    // The squatter adds the domain before the owner and asks for verification over and over.
    const theirs = (await add('corp.example', squatter)).body;
    const mine = (await add('corp.example', owner)).body;
    expect(mine.dns.find((r: any) => r.name === '_svc-verify.corp.example').value).toMatch(/^svc-verify=[0-9a-f]{40}$/);
    expect(theirs.dns.find((r: any) => r.name === '_svc-verify.corp.example').value)
      .not.toBe(mine.dns.find((r: any) => r.name === '_svc-verify.corp.example').value);
    // A pending row never answers for the domain.
    expect(await rcpt('ceo@corp.example')).toBe(550);

    // The owner publishes MX (the same for everyone) and their own token.
    zone.set('corp.example', 'MX', [{ value: SERVICE, priority: 10 }]);
    for (let i = 0; i < 3; i++) expect((await verify(theirs.domain.id, squatter)).body).toMatchObject({ status: 'pending', checks: { mx: false, ownership: false } });
    publishOwnership(zone, 'corp.example', mine.dns);
    expect((await verify(theirs.domain.id, squatter)).body.status).toBe('pending');
    expect((await verify(mine.domain.id, owner)).body).toMatchObject({ status: 'verified', checks: { mx: true, ownership: true } });
    expect((await verify(theirs.domain.id, squatter)).body.status).toBe('pending');

    const smtp = nodemailer.createTransport({ host: '127.0.0.1', port: stack.service.smtpPort!, secure: false, ignoreTLS: true });
    await smtp.sendMail({ from: 'a@far.example', to: 'ceo@corp.example', subject: 'board minutes', text: 'private' });
    expect((await messagesOf(owner)).map((m) => m.subject)).toContain('board minutes');
    expect((await messagesOf(squatter)).map((m) => m.subject)).not.toContain('board minutes');
  });

  it('at most one account holds a domain verified, even when both publish their token', async () => {
    const a = (await add('both.example', owner)).body;
    const b = (await add('both.example', squatter)).body;
    zone.set('both.example', 'MX', [{ value: SERVICE, priority: 10 }]);
    zone.set('_svc-verify.both.example', 'TXT', [a, b].map((x) => ({ value: x.dns.find((r: any) => r.name === '_svc-verify.both.example').value })));
    const results = await Promise.all([verify(a.domain.id, owner), verify(b.domain.id, squatter), verify(a.domain.id, owner), verify(b.domain.id, squatter)]);
    expect(results.every((r) => r.status === 200)).toBe(true);
    const rows = await stack.service.core.db.select().from(schema.domains).where(eq(schema.domains.domain, 'both.example'));
    expect(rows.filter((r) => r.status === 'verified')).toHaveLength(1);
  });

  it('deleting the verified domain frees it for the next account that proves ownership', async () => {
    const first = (await add('moved.example', owner)).body;
    zone.set('moved.example', 'MX', [{ value: SERVICE, priority: 10 }]);
    publishOwnership(zone, 'moved.example', first.dns);
    expect((await verify(first.domain.id, owner)).body.status).toBe('verified');
    const next = (await add('moved.example', squatter)).body;
    expect(next.domain).toBeUndefined(); // refused: held verified by another account
    expect((await stack.api('DELETE', `/api/domains/${first.domain.id}`, { token: owner })).status).toBe(200);
    const added = (await add('moved.example', squatter)).body;
    publishOwnership(zone, 'moved.example', added.dns);
    expect((await verify(added.domain.id, squatter)).body.status).toBe('verified');
  });
});

describe('DNS failures keep the previous state', () => {
  it('a verified domain keeps receiving through a DNS outage', async () => {
    const d = (await add('steady.example', owner)).body;
    zone.set('steady.example', 'MX', [{ value: SERVICE, priority: 10 }]);
    publishOwnership(zone, 'steady.example', d.dns);
    expect((await verify(d.domain.id, owner)).body.status).toBe('verified');
    failing.add('steady.example');
    try {
      expect((await verify(d.domain.id, owner)).body).toMatchObject({ status: 'verified', checks: { mx: true, ownership: true } });
      expect(await rcpt('x@steady.example')).toBe(250);
    } finally {
      failing.delete('steady.example');
    }
    zone.remove('steady.example', 'MX');
    expect((await verify(d.domain.id, owner)).body.checks.mx).toBe(false); // a real answer does change it
  });

  it('a known domain whose check hit an outage answers 451, never 550', async () => {
    const d = (await add('flaky.example', owner)).body;
    failing.add('flaky.example');
    try {
      await verify(d.domain.id, owner);
      expect(await rcpt('x@flaky.example')).toBe(451);
    } finally {
      failing.delete('flaky.example');
    }
    await verify(d.domain.id, owner); // the records answer now: not published, a permanent "no"
    expect(await rcpt('x@flaky.example')).toBe(550);
  });
});
