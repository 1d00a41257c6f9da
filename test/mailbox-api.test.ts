import { eq } from 'drizzle-orm';
import { dkimVerify } from 'mailauth/lib/dkim/verify.js';
import { simpleParser } from 'mailparser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { credentialHash } from '../core/secrets.js';
import { schema } from '../db/index.js';
import { resolverFor } from './helpers/dns.js';
import { ingress, mintPassword } from './helpers/mailbox.js';
import { FROM_DOMAIN, startSendingStack, type SendingStack } from './helpers/sending.js';
import { eventually, type TestStack } from './helpers/stack.js';
import { startWebhookReceiver } from './helpers/webhook-receiver.js';

let env: SendingStack;
let stack: TestStack;
let session: string;
let domainId: string;
let hooks: Awaited<ReturnType<typeof startWebhookReceiver>>;
let mail: ReturnType<typeof ingress>;

beforeAll(async () => {
  // 5: the tests before the lockout's own fail three logins from the loopback address (revoked passwords), and a
  // good login gives back only its own attempt (docs/mailboxes.md), so those three stay counted.
  env = await startSendingStack({
    env: { LOGIN_MAX_FAILURES: '5', LOGIN_LOCKOUT_MS: '60000', TRUST_PROXY: 'loopback' },
  });
  ({ stack, session } = env);
  domainId = (await stack.api('GET', '/api/domains', { token: session })).body.find(
    (d: any) => d.domain === FROM_DOMAIN,
  ).id;
  hooks = await startWebhookReceiver();
  mail = ingress(stack);
});
afterAll(async () => {
  await env?.stop();
  await hooks?.close();
});

const list = (secret: string, query = '') => stack.api('GET', `/api/mailbox/messages${query}`, { token: secret });
const inbox = async (secret: string, subject: string, query = '') =>
  eventually(async () => (await list(secret, query)).body.messages?.find((m: any) => m.subject === subject));

describe('app passwords', () => {
  it('are minted per domain and pattern, shown once, changed, rotated and deleted at once', async () => {
    const created = await stack.api('POST', '/api/app-passwords', { token: session, body: { domain: FROM_DOMAIN } });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      id: expect.stringMatching(/^apw_/),
      domain_id: domainId,
      domain: FROM_DOMAIN,
      address: '*',
      protocols: ['imap'],
      legacy: false,
      secret: expect.stringMatching(/^svc_pw_/),
      key_prefix: created.body.secret.slice(0, 12),
      last_used_at: null,
    });
    const row = (
      await stack.service.core.db.select().from(schema.appPasswords).where(eq(schema.appPasswords.id, created.body.id))
    )[0]!;
    expect(row.secretHash).toBe(credentialHash(created.body.secret));
    expect(JSON.stringify(row)).not.toContain(created.body.secret);
    const listed = (await stack.api('GET', '/api/app-passwords', { token: session })).body;
    expect(listed.find((p: any) => p.id === created.body.id)).not.toHaveProperty('secret');

    const byId = await mintPassword(stack, session, {
      domainId,
      address: 'support-*',
      protocols: ['api', 'imap'],
      label: 'support desk',
    });
    expect(byId).toMatchObject({ address: 'support-*', protocols: ['api', 'imap'], label: 'support desk' });
    for (const address of ['a@b', 'sup*port', '']) {
      expect(
        (await stack.api('POST', '/api/app-passwords', { token: session, body: { domainId, address } })).status,
      ).toBe(400);
    }
    expect(
      (await stack.api('POST', '/api/app-passwords', { token: session, body: { domain: 'not-mine.example' } })).status,
    ).toBe(404);
    expect(
      (await stack.api('PATCH', `/api/app-passwords/${byId.id}`, { token: session, body: { domainId: 'dom_other' } }))
        .body.code,
    ).toBe('validation_error');
    const patched = await stack.api('PATCH', `/api/app-passwords/${created.body.id}`, {
      token: session,
      body: { protocols: ['api'], address: 'hello' },
    });
    expect(patched.body).toMatchObject({ protocols: ['api'], address: 'hello', domain: FROM_DOMAIN });
    expect((await list(created.body.secret)).status).toBe(200);

    const rotated = await stack.api('POST', `/api/app-passwords/${created.body.id}/rotate`, { token: session });
    expect(rotated.body).toMatchObject({
      id: created.body.id,
      address: 'hello',
      protocols: ['api'],
      secret: expect.stringMatching(/^svc_pw_/),
    });
    expect((await list(created.body.secret, '')).status).toBe(401);
    expect((await list(rotated.body.secret)).status).toBe(200);
    expect((await stack.api('DELETE', `/api/app-passwords/${created.body.id}`, { token: session })).body).toEqual({
      ok: true,
    });
    expect((await list(rotated.body.secret)).status).toBe(401);
    expect((await stack.api('DELETE', `/api/app-passwords/${created.body.id}`, { token: session })).status).toBe(404);
  });

  it('a domain-scoped key cannot mint them; app passwords work only on /api/mailbox/*', async () => {
    const scoped = (await stack.api('POST', '/api/keys/scoped', { token: session, body: { domainId } })).body.key;
    expect((await stack.api('POST', '/api/app-passwords', { token: scoped, body: { domainId } })).status).toBe(403);
    const pw = await mintPassword(stack, session, { domainId, protocols: ['api'] });
    expect((await stack.api('GET', '/api/domains', { token: pw.secret })).status).toBe(403);
    const imapOnly = await mintPassword(stack, session, { domainId });
    expect((await list(imapOnly.secret)).body.code).toBe('protocol_not_granted');
  });

  it('legacy svc_imap_ credentials stay IMAP-only', async () => {
    const secret = 'svc_imap_legacy-credential-0123456789';
    const [user] = await stack.service.core.db
      .select()
      .from(schema.users)
      .where(eq(schema.users.email, 'sender@example.com'));
    await stack.service.core.db.insert(schema.appPasswords).values({
      id: 'apw_legacy_000000000000000000',
      userId: user!.id,
      domainId: null,
      label: 'old',
      address: '*',
      protocols: ['imap'],
      keyPrefix: secret.slice(0, 14),
      secretHash: credentialHash(secret),
      legacy: true,
      createdAt: Date.now(),
    });
    const row = (await stack.api('GET', '/api/app-passwords', { token: session })).body.find((p: any) => p.legacy);
    expect(row).toMatchObject({ domain: '*', domain_id: null, legacy: true, protocols: ['imap'] });
    expect(
      (
        await stack.api('PATCH', `/api/app-passwords/${row.id}`, {
          token: session,
          body: { protocols: ['imap', 'api'] },
        })
      ).body.code,
    ).toBe('legacy_imap_only');
    expect((await list(secret)).status).toBe(403);
    const login = await stack.service.core.mailboxes.login(`anyone@${FROM_DOMAIN}`, secret, '10.0.0.1');
    expect(login).toMatchObject({ address: `anyone@${FROM_DOMAIN}`, domainId });
  });
});

describe('mailbox API', () => {
  it('lists, pages, reads raw and replaces flags, within the password pattern only', async () => {
    const support = await mintPassword(stack, session, { domainId, address: 'support-*', protocols: ['api'] });
    await mail({ to: `support-eu@${FROM_DOMAIN}`, subject: 'eu one' });
    await mail({ to: `support-eu@${FROM_DOMAIN}`, subject: 'eu two' });
    await mail({ to: `sales@${FROM_DOMAIN}`, subject: 'for sales' });
    const two = await inbox(support.secret, 'eu two');
    expect(two).toMatchObject({
      uid: expect.any(Number),
      flags: '',
      from_addr: 'alice@far.example',
      to_addr: `support-eu@${FROM_DOMAIN}`,
      size: expect.any(Number),
    });
    expect(new Date(two.internaldate).toISOString()).toBe(two.internaldate);
    const all = (await list(support.secret)).body;
    expect(all.messages.map((m: any) => m.subject)).toEqual(['eu two', 'eu one']);
    expect(all.nextBefore).toBeNull();

    const page1 = (await list(support.secret, '?limit=1')).body;
    expect(page1.messages.map((m: any) => m.subject)).toEqual(['eu two']);
    const page2 = (await list(support.secret, `?limit=1&before=${page1.nextBefore}`)).body;
    expect(page2).toEqual({ messages: [expect.objectContaining({ subject: 'eu one' })], nextBefore: null });
    expect((await list(support.secret, '?limit=0')).status).toBe(400);
    expect((await list(support.secret, '?limit=201')).status).toBe(400);
    expect((await list(support.secret, `?address=support-eu@${FROM_DOMAIN}`)).body.messages).toHaveLength(2);
    expect((await list(support.secret, `?address=sales@${FROM_DOMAIN}`)).status).toBe(403);
    expect((await list(support.secret, '?mailbox=Sent')).body).toEqual({ messages: [], nextBefore: null });

    const every = await mintPassword(stack, session, { domainId, protocols: ['api'] });
    const sales = await inbox(every.secret, 'for sales');
    expect((await stack.api('GET', `/api/mailbox/messages/${sales.uid}/raw`, { token: support.secret })).status).toBe(
      404,
    );
    expect(
      (
        await stack.api('POST', `/api/mailbox/messages/${sales.uid}/flags`, {
          token: support.secret,
          body: { flags: 'Seen' },
        })
      ).status,
    ).toBe(404);

    const raw = await stack.api('GET', `/api/mailbox/messages/${two.uid}/raw`, { token: support.secret });
    expect(raw.body).toEqual({ uid: two.uid, raw: expect.stringContaining('Subject: eu two') });
    const bytes = await fetch(`${stack.baseUrl}/api/mailbox/messages/${two.uid}/raw`, {
      headers: { authorization: `Bearer ${support.secret}`, accept: 'message/rfc822' },
    });
    expect(bytes.headers.get('content-type')).toMatch(/^message\/rfc822/);
    const body = Buffer.from(await bytes.arrayBuffer());
    expect(body.length).toBe(two.size);
    expect((await simpleParser(body)).subject).toBe('eu two');

    expect(
      (
        await stack.api('POST', `/api/mailbox/messages/${two.uid}/flags`, {
          token: support.secret,
          body: { flags: 'Seen Flagged $Important' },
        })
      ).body,
    ).toEqual({ ok: true });
    expect((await inbox(support.secret, 'eu two')).flags).toBe('Seen Flagged $Important');
    await stack.api('POST', `/api/mailbox/messages/${two.uid}/flags`, {
      token: support.secret,
      body: { flags: 'seen' },
    });
    expect((await inbox(support.secret, 'eu two')).flags).toBe('Seen');
  });

  it("files sent mail into the sender address's Sent folder", async () => {
    const hello = await mintPassword(stack, session, { domainId, address: 'hello', protocols: ['api'] });
    const sent = await env.send({ to: 'bob@rcpt.test', subject: 'outgoing one' });
    expect(sent.status).toBe(200);
    const row = await inbox(hello.secret, 'outgoing one', '?mailbox=Sent');
    expect(row).toMatchObject({ flags: 'Seen', from_addr: `hello@${FROM_DOMAIN}`, to_addr: `hello@${FROM_DOMAIN}` });
    expect(
      (await stack.api('GET', `/api/mailbox/messages/${row.uid}/raw`, { token: hello.secret })).body.raw,
    ).toContain('DKIM-Signature');
  });

  it('files nothing for a zero-retention domain', async () => {
    const zero = (await stack.api('POST', '/api/domains/subdomain', { token: session, body: { subdomain: 'zero' } }))
      .body.domain;
    await stack.service.core.db.update(schema.domains).set({ zeroRetention: 1 }).where(eq(schema.domains.id, zero.id));
    const pw = await mintPassword(stack, session, { domainId: zero.id, protocols: ['api'] });
    await mail({ to: `kept-not@${zero.domain}`, subject: 'ephemeral' });
    await eventually(
      async () =>
        (await stack.service.core.db.select().from(schema.messages).where(eq(schema.messages.domainId, zero.id)))
          .length > 0,
    );
    expect((await list(pw.secret)).body).toEqual({ messages: [], nextBefore: null });
    expect(
      await stack.service.core.db.select().from(schema.mailboxes).where(eq(schema.mailboxes.domainId, zero.id)),
    ).toEqual([]);
  });

  it('deleting a domain removes its mailboxes and the app passwords of it', async () => {
    const gone = (await stack.api('POST', '/api/domains/subdomain', { token: session, body: { subdomain: 'gone' } }))
      .body.domain;
    const pw = await mintPassword(stack, session, { domainId: gone.id, protocols: ['api'] });
    await mail({ to: `someone@${gone.domain}`, subject: 'before delete' });
    await inbox(pw.secret, 'before delete');
    expect((await stack.api('DELETE', `/api/domains/${gone.id}`, { token: session })).status).toBe(200);
    expect((await list(pw.secret)).status).toBe(401);
    expect((await stack.api('GET', '/api/app-passwords', { token: session })).body.map((p: any) => p.id)).not.toContain(
      pw.id,
    );
    expect(
      await stack.service.core.db.select().from(schema.mailboxes).where(eq(schema.mailboxes.domainId, gone.id)),
    ).toEqual([]);
  });

  it('locks an address out after repeated failures', async () => {
    const headers = { 'x-forwarded-for': '203.0.113.77' };
    for (let i = 0; i < 5; i++) {
      expect((await stack.api('GET', '/api/mailbox/messages', { token: 'svc_pw_wrong', headers })).status).toBe(401);
    }
    const locked = await stack.api('GET', '/api/mailbox/messages', { token: 'svc_pw_wrong', headers });
    expect(locked.status).toBe(429);
    expect(locked.body.code).toBe('login_locked');
    expect(Number(locked.headers.get('retry-after'))).toBeGreaterThan(0);
    const good = await mintPassword(stack, session, { domainId, protocols: ['api'] });
    expect((await stack.api('GET', '/api/mailbox/messages', { token: good.secret, headers })).status).toBe(429);
    expect(
      (
        await stack.api('GET', '/api/mailbox/messages', {
          token: good.secret,
          headers: { 'x-forwarded-for': '203.0.113.78' },
        })
      ).status,
    ).toBe(200);
  });
});

describe('route actions', () => {
  it('takes {match, action, destination}; lists action, destination and secret; refuses agent', async () => {
    const created = await stack.api('POST', '/api/routes', {
      token: session,
      body: { match: `orders@${FROM_DOMAIN}`, destination: `${hooks.base}/orders` },
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      pattern: 'orders',
      match_pattern: `orders@${FROM_DOMAIN}`,
      action: 'webhook',
      destination: `${hooks.base}/orders`,
      signingSecret: expect.stringMatching(/^whsec_/),
    });
    const plus = await stack.api('POST', '/api/routes', {
      token: session,
      body: { match: `tickets+*@${FROM_DOMAIN}`, action: 'store' },
    });
    expect(plus.body).toMatchObject({ pattern: 'tickets+*', action: 'store', destination: null });
    const old = await stack.api('POST', '/api/routes', {
      token: session,
      body: { domainId, address: 'legacy-*', url: `${hooks.base}/legacy` },
    });
    expect(old.body).toMatchObject({ action: 'webhook', url: `${hooks.base}/legacy` });
    const rows = (await stack.api('GET', '/api/routes', { token: session })).body;
    expect(rows.find((r: any) => r.id === created.body.id)).toMatchObject({
      match_pattern: `orders@${FROM_DOMAIN}`,
      action: 'webhook',
      destination: `${hooks.base}/orders`,
      signing_secret: created.body.signingSecret,
    });
    const agent = await stack.api('POST', '/api/routes', {
      token: session,
      body: { match: `bot@${FROM_DOMAIN}`, action: 'agent' },
    });
    expect(agent).toMatchObject({ status: 400, body: { code: 'unsupported_action' } });
    expect(
      (
        await stack.api('POST', '/api/routes', {
          token: session,
          body: { match: `f@${FROM_DOMAIN}`, action: 'forward', destination: 'not an address' },
        })
      ).status,
    ).toBe(400);
    expect(
      (
        await stack.api('POST', '/api/routes', {
          token: session,
          body: { match: 'x@elsewhere.example', action: 'store' },
        })
      ).status,
    ).toBe(404);
  });

  it('forward re-sends the original through the outbound pipeline, DKIM-signed by the forwarding domain', async () => {
    await stack.api('POST', '/api/routes', {
      token: session,
      body: { match: `fwd@${FROM_DOMAIN}`, action: 'forward', destination: 'owner@rcpt.test' },
    });
    await mail({ to: `fwd@${FROM_DOMAIN}`, subject: 'please forward', text: 'forward me' });
    const got = await env.sink.waitFor((r) => r.to.includes('owner@rcpt.test'));
    // The envelope sender is SRS (test/forward-srs.test.ts); far.example publishes no DMARC policy, so From stays.
    expect(got.from).toMatch(
      new RegExp(`^SRS0=[a-z2-7]{8}=[a-z2-7]{2}=far\\.example=alice@${FROM_DOMAIN.replace(/\./g, '\\.')}$`, 'i'),
    );
    const parsed = await simpleParser(got.raw);
    expect(parsed.subject).toBe('please forward');
    expect(parsed.from?.value[0]?.address).toBe('alice@far.example');
    expect(parsed.headers.get('x-svc-forwarded-for')).toBe(`fwd@${FROM_DOMAIN}`);
    expect(parsed.text).toContain('forward me');
    const r = resolverFor(`127.0.0.1:${env.dnsPort}`);
    const verdict = await dkimVerify(got.raw, {
      resolver: ((name: string, rr: string) => r.resolve(name, rr)) as never,
    });
    expect(verdict.results[0]).toMatchObject({ status: { result: 'pass' }, signingDomain: FROM_DOMAIN });
  });

  it('store files into the mailbox without a webhook; drop leaves nothing', async () => {
    const hook = await stack.api('PUT', `/api/domains/${domainId}/webhook`, {
      token: session,
      body: { url: `${hooks.base}/all` },
    });
    hooks.secret('/all', hook.body.signingSecret);
    await stack.api('POST', '/api/routes', { token: session, body: { match: `keep@${FROM_DOMAIN}`, action: 'store' } });
    await stack.api('POST', '/api/routes', { token: session, body: { match: `void@${FROM_DOMAIN}`, action: 'drop' } });
    const every = await mintPassword(stack, session, { domainId, protocols: ['api'] });
    await mail({ to: `keep@${FROM_DOMAIN}`, subject: 'kept quietly' });
    await mail({ to: `void@${FROM_DOMAIN}`, subject: 'into the void' });
    await mail({ to: `anyone@${FROM_DOMAIN}`, subject: 'barrier' });
    const kept = await inbox(every.secret, 'kept quietly');
    expect(kept.to_addr).toBe(`keep@${FROM_DOMAIN}`);
    await hooks.waitFor('/all');
    await eventually(async () => hooks.hitsOn('/all').some((h) => h.json.subject === 'barrier'));
    const keptRow = (
      await stack.service.core.db.select().from(schema.mailboxMessages).where(eq(schema.mailboxMessages.uid, kept.uid))
    )[0]!;
    await eventually(
      async () => (await stack.api('GET', `/api/messages/${keptRow.messageId}`, { token: session })).body.message,
    );
    const detail = (await stack.api('GET', `/api/messages/${keptRow.messageId}`, { token: session })).body;
    expect(detail.deliveries).toEqual([]);
    expect(hooks.hitsOn('/all').map((h) => h.json.subject)).not.toContain('kept quietly');
    expect(hooks.hitsOn('/all').map((h) => h.json.subject)).not.toContain('into the void');
    expect((await list(every.secret)).body.messages.map((m: any) => m.subject)).not.toContain('into the void');
    const rows = await stack.service.core.db
      .select()
      .from(schema.messages)
      .where(eq(schema.messages.subject, 'into the void'));
    expect(rows).toEqual([]);
  });
});
