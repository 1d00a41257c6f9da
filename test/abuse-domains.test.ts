import { eq } from 'drizzle-orm';
import nodemailer from 'nodemailer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDnsServer, type DnsServer } from '../dns/server.js';
import { createStaticZone } from '../dns/static-zone.js';
import { schema } from '../db/index.js';
import { createOwnershipTokens } from '../core/domains/ownership.js';
import { ownMxOf, publishOwnMx } from './helpers/dns.js';
import { startStack, type TestStack } from './helpers/stack.js';
import { rawSmtp } from './helpers/smtp-client.js';
import { rawImap } from './helpers/imap-wire.js';
import { mintPassword } from './helpers/mailbox.js';

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
  owner = (
    await stack.api('POST', '/api/auth/signup', { body: { email: 'owner@corp.example', password: 'owner password' } })
  ).body.token;
  squatter = (
    await stack.api('POST', '/api/auth/signup', {
      body: { email: 'squatter@example.com', password: 'squatter password' },
    })
  ).body.token;
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
  it("two accounts add the same domain: only the owner's published MX verifies, and mail reaches the owner", async () => {
    // The squatter adds the domain before the owner and asks for verification over and over.
    const theirs = (await add('corp.example', squatter)).body;
    const mine = (await add('corp.example', owner)).body;
    // Each row has its own MX host under the service domain, so the records differ.
    expect(ownMxOf('corp.example', mine.dns).value).toMatch(
      new RegExp(`^[0-9a-f]{20}\\.mx\\.${SERVICE.replace(/\./g, '\\.')}$`),
    );
    expect(ownMxOf('corp.example', theirs.dns).value).not.toBe(ownMxOf('corp.example', mine.dns).value);
    // A pending row never answers for the domain.
    expect(await rcpt('ceo@corp.example')).toBe(550);

    // The owner publishes the MX record their dashboard showed them, and nothing else.
    publishOwnMx(zone, 'corp.example', mine.dns);
    for (let i = 0; i < 3; i++)
      expect((await verify(theirs.domain.id, squatter)).body).toMatchObject({
        status: 'pending',
        checks: { mx: false, ownership: false },
      });
    expect((await verify(mine.domain.id, owner)).body).toMatchObject({
      status: 'verified',
      checks: { mx: true, ownership: true },
    });
    expect((await verify(theirs.domain.id, squatter)).body.status).toBe('pending');
    const rows = await stack.service.core.db
      .select()
      .from(schema.domains)
      .where(eq(schema.domains.domain, 'corp.example'));
    expect(rows.map((r) => [r.userId === theirs.domain.user_id ? 'squatter' : 'owner', r.status]).sort()).toEqual([
      ['owner', 'verified'],
      ['squatter', 'pending'],
    ]);

    const smtp = nodemailer.createTransport({
      host: '127.0.0.1',
      port: stack.service.smtpPort!,
      secure: false,
      ignoreTLS: true,
    });
    await smtp.sendMail({ from: 'a@far.example', to: 'ceo@corp.example', subject: 'board minutes', text: 'private' });
    expect((await messagesOf(owner)).map((m) => m.subject)).toContain('board minutes');
    expect((await messagesOf(squatter)).map((m) => m.subject)).not.toContain('board minutes');
  });

  it("the squatter's earlier pending row locks nobody out: IMAP LOGIN and the mailbox API resolve the owner's verified row", async () => {
    const mine = (await stack.api('GET', '/api/domains', { token: owner })).body.find(
      (x: { domain: string }) => x.domain === 'corp.example',
    );
    const rows = await stack.service.core.db
      .select()
      .from(schema.domains)
      .where(eq(schema.domains.domain, 'corp.example'));
    // The squatter's row was added first (and is pending); the owner's is the verified one.
    expect(rows.find((r) => r.userId !== mine.user_id)!.createdAt).toBeLessThanOrEqual(
      rows.find((r) => r.id === mine.id)!.createdAt,
    );
    const pw = await mintPassword(stack, owner, { domainId: mine.id, address: 'ceo', protocols: ['imap', 'api'] });
    const c = await rawImap(stack.service.imapPort!);
    expect(await c.cmd('a1', `LOGIN ceo@corp.example ${pw.secret}`)).toMatch(/^a1 OK/);
    expect(await c.cmd('a2', 'SELECT INBOX')).toMatch(/^a2 OK/);
    c.close();
    const listed = await stack.api('GET', '/api/mailbox/messages?address=ceo@corp.example', { token: pw.secret });
    expect(listed.status).toBe(200);
    // The squatter's password for its pending row opens nothing.
    const theirs = rows.find((r) => r.userId !== mine.user_id)!;
    const res = await stack.api('POST', '/api/app-passwords', {
      token: squatter,
      body: { domainId: theirs.id, address: 'ceo', protocols: ['imap', 'api'] },
    });
    if (res.status === 201) {
      const d = await rawImap(stack.service.imapPort!);
      expect(await d.cmd('b1', `LOGIN ceo@corp.example ${res.body.secret}`)).toMatch(/^b1 NO \[AUTHENTICATIONFAILED\]/);
      d.close();
      expect(
        (await stack.api('GET', '/api/mailbox/messages?address=ceo@corp.example', { token: res.body.secret })).status,
      ).toBe(403);
    } else expect(res.status).toBeGreaterThanOrEqual(400);
  });

  it("an MX at the service domain itself proves nothing alone; with the account's _svc-verify token it still does (the older proof)", async () => {
    const theirs = (await add('legacy.example', squatter)).body;
    const mine = (await add('legacy.example', owner)).body;
    zone.set('legacy.example', 'MX', [{ value: SERVICE, priority: 10 }]);
    expect((await verify(mine.domain.id, owner)).body).toMatchObject({
      status: 'pending',
      checks: { mx: false, ownership: false },
    });
    const token = createOwnershipTokens(stack.config.secretKey).record(mine.domain.user_id, 'legacy.example');
    zone.set(token.name, 'TXT', [{ value: token.value }]);
    expect((await verify(theirs.domain.id, squatter)).body).toMatchObject({
      status: 'pending',
      checks: { mx: false, ownership: false },
    });
    expect((await verify(mine.domain.id, owner)).body).toMatchObject({
      status: 'verified',
      checks: { mx: true, ownership: true },
    });
  });

  it('at most one account holds a domain verified, even when both MX hosts are published', async () => {
    const a = (await add('both.example', owner)).body;
    const b = (await add('both.example', squatter)).body;
    zone.set(
      'both.example',
      'MX',
      [a, b].map((x) => ({ value: ownMxOf('both.example', x.dns).value, priority: 10 })),
    );
    const results = await Promise.all([
      verify(a.domain.id, owner),
      verify(b.domain.id, squatter),
      verify(a.domain.id, owner),
      verify(b.domain.id, squatter),
    ]);
    expect(results.every((r) => r.status === 200)).toBe(true);
    const rows = await stack.service.core.db
      .select()
      .from(schema.domains)
      .where(eq(schema.domains.domain, 'both.example'));
    expect(rows.filter((r) => r.status === 'verified')).toHaveLength(1);
  });

  it('deleting the verified domain frees it for the next account that proves ownership', async () => {
    const first = (await add('moved.example', owner)).body;
    publishOwnMx(zone, 'moved.example', first.dns);
    expect((await verify(first.domain.id, owner)).body.status).toBe('verified');
    const next = (await add('moved.example', squatter)).body;
    expect(next.domain).toBeUndefined(); // refused: held verified by another account
    expect((await stack.api('DELETE', `/api/domains/${first.domain.id}`, { token: owner })).status).toBe(200);
    const added = (await add('moved.example', squatter)).body;
    expect((await verify(added.domain.id, squatter)).body.status).toBe('pending'); // the old owner's MX is not theirs
    publishOwnMx(zone, 'moved.example', added.dns);
    expect((await verify(added.domain.id, squatter)).body.status).toBe('verified');
  });
});

describe('DNS failures keep the previous state', () => {
  it('a verified domain keeps receiving through a DNS outage', async () => {
    const d = (await add('steady.example', owner)).body;
    publishOwnMx(zone, 'steady.example', d.dns);
    expect((await verify(d.domain.id, owner)).body.status).toBe('verified');
    failing.add('steady.example');
    try {
      expect((await verify(d.domain.id, owner)).body).toMatchObject({
        status: 'verified',
        checks: { mx: true, ownership: true },
      });
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
