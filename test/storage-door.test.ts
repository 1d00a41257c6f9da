import { generateKeyPairSync } from 'node:crypto';
import { and, eq, inArray } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schema } from '../db/index.js';
import { ConsentDriver, authorizeUrl, pkce, registerClient, tokenRequest, verifiedAccount } from './helpers/oauth.js';
import { freePort } from './helpers/ports.js';
import { SERVICE, startSendingStack, type SendingStack } from './helpers/sending.js';
import { rawSmtp, type SmtpReply } from './helpers/smtp-client.js';
import { eventually } from './helpers/stack.js';

// Issue 29, item 4: "tried with an 8 MiB quota, four 1 MiB messages to 20 addresses of a hosted subdomain
// were all answered 250 and stored 80 MB". Storage is counted at the door, and stored once.
const MiB = 1024 * 1024;
const QUOTA = 8 * MiB;
const CAPS = { contacts: 3, events: 2, oauthApps: 1 };
const ALLOWANCE = { messages: 3, bytes: 64 * 1024 };

let env: SendingStack;
const db = () => env.stack.service.core.db;
beforeAll(async () => {
  // PUBLIC_URL is the address the tests call (the OAuth issuer).
  const port = await freePort();
  env = await startSendingStack({
    env: {
      PORT: String(port),
      PUBLIC_URL: `http://127.0.0.1:${port}`,
      OAUTH_APPS_PER_ACCOUNT: String(CAPS.oauthApps),
      STORAGE_QUOTA_BYTES: String(QUOTA),
      UNVERIFIED_INBOUND_DAILY: String(ALLOWANCE.messages),
      UNVERIFIED_INBOUND_DAILY_BYTES: String(ALLOWANCE.bytes),
      CONTACTS_PER_ACCOUNT: String(CAPS.contacts),
      APP_EVENTS_PER_ACCOUNT: String(CAPS.events),
    },
  });
});
afterAll(async () => {
  await env?.stop();
});

/** An account with a hosted subdomain `<sub>.<SERVICE>` (verified or not), its session and account key. */
async function account(sub: string, verified: boolean) {
  const s = (
    await env.stack.api('POST', '/api/auth/signup', {
      body: { email: `${sub}@example.com`, password: `${sub} password 1` },
    })
  ).body;
  await db().update(schema.users).set({ emailVerified: verified }).where(eq(schema.users.id, s.user.id));
  expect(
    (await env.stack.api('POST', '/api/domains/subdomain', { token: s.token, body: { subdomain: sub } })).status,
  ).toBe(201);
  const key: string = (await env.stack.api('GET', '/api/keys', { token: s.token })).body.key;
  return { userId: s.user.id as string, session: s.token as string, key, domain: `${sub}.${SERVICE}` };
}

let serial = 0;
/** A message of exactly `size` bytes as stored: CRLF lines of about 80 bytes, the last one ending in CRLF, none starting with a dot. */
function message(size: number, from = 'sender@far.example'): Buffer {
  const head = `From: <${from}>\r\nSubject: door ${++serial}\r\nMessage-ID: <door-${serial}-${Date.now()}@far.example>\r\n\r\n`;
  const lines: number[] = [];
  let left = size - head.length;
  for (; left > 80; left -= 80) lines.push(78);
  if (left >= 2) lines.push(left - 2);
  else lines[lines.length - 1]! += left;
  const out = Buffer.from(head + lines.map((n) => `${'x'.repeat(n)}\r\n`).join(''), 'latin1');
  expect(out.length).toBe(size);
  return out;
}

/** One SMTP transaction over loopback: each RCPT's reply, and DATA's when any recipient was accepted. */
async function deliver(
  rcpts: string[],
  raw: Buffer,
  from = 'sender@far.example',
): Promise<{ rcpt: SmtpReply[]; data?: SmtpReply }> {
  const c = await rawSmtp(env.stack.service.smtpPort!);
  try {
    expect((await c.command('EHLO tester.example')).code).toBe(250);
    expect((await c.command(`MAIL FROM:<${from}>`)).code).toBe(250);
    const rcpt: SmtpReply[] = [];
    for (const r of rcpts) rcpt.push(await c.command(`RCPT TO:<${r}>`));
    if (!rcpt.some((r) => r.code === 250)) return { rcpt };
    expect((await c.command('DATA')).code).toBe(354);
    // The message ends with its own CRLF, then the terminating dot line.
    await c.write(raw);
    await c.write('.\r\n');
    return { rcpt, data: await c.reply(60_000) };
  } finally {
    c.close();
  }
}

const usage = async (session: string) =>
  (await env.stack.api('GET', '/api/billing/usage', { token: session })).body.storage as {
    used: number;
    mailboxes: number;
  };
const bodiesOf = (userId: string) =>
  db()
    .select({ id: schema.mailboxBodies.id, size: schema.mailboxBodies.size })
    .from(schema.mailboxBodies)
    .where(eq(schema.mailboxBodies.userId, userId));

describe('storage counted at the door', () => {
  it('the reproduction: 1 MiB to 20 addresses is stored once and counted once; past the quota DATA answers 452 4.2.2 (552 5.2.2 for what never fits) and RCPT 452 4.2.2', async () => {
    const a = await account('door', true);
    const twenty = Array.from({ length: 20 }, (_, i) => `r${i}@${a.domain}`);
    for (let i = 0; i < 4; i++) {
      const r = await deliver(twenty, message(MiB));
      expect(r.rcpt.map((x) => x.code)).toEqual(Array(20).fill(250));
      expect(r.data?.code).toBe(250);
    }
    // Four bodies of 1 MiB, 80 mailbox rows referring to them, 4 MiB counted (the old code stored and counted 80 MiB).
    const bodies = await bodiesOf(a.userId);
    expect(bodies.map((b) => b.size)).toEqual(Array(4).fill(MiB));
    const rows = await db()
      .select({ bodyId: schema.mailboxMessages.bodyId })
      .from(schema.mailboxMessages)
      .where(
        inArray(
          schema.mailboxMessages.bodyId,
          bodies.map((b) => b.id),
        ),
      );
    expect(rows).toHaveLength(80);
    expect(await usage(a.session)).toMatchObject({ used: 4 * MiB, mailboxes: 4 * MiB });

    // A message larger than the whole quota can never fit: permanent.
    const huge = await deliver([twenty[0]!], message(QUOTA + 1));
    expect(huge.data).toMatchObject({ code: 552, text: expect.stringMatching(/^5\.2\.2 /) });
    for (let i = 0; i < 3; i++) expect((await deliver(twenty, message(MiB))).data?.code).toBe(250);
    expect((await usage(a.session)).used).toBe(7 * MiB);
    // One byte more than the room left: refused at DATA, temporarily (the owner can make room).
    const over = await deliver(twenty, message(MiB + 1));
    expect(over.rcpt.map((x) => x.code)).toEqual(Array(20).fill(250));
    expect(over.data).toMatchObject({ code: 452, text: expect.stringMatching(/^4\.2\.2 .*storage quota/) });
    // Three at once for the room of one: they are judged one after the other under the account's storage
    // lock, so exactly one is stored; then the account is at its quota and RCPT refuses.
    const three = await Promise.all([0, 1, 2].map(() => deliver(twenty, message(MiB))));
    expect(three.map((r) => r.data?.code).sort()).toEqual([250, 452, 452]);
    expect((await usage(a.session)).used).toBe(QUOTA);
    const full = await deliver(twenty.slice(0, 2), message(1000));
    expect(full.rcpt).toEqual([
      { code: 452, text: expect.stringMatching(/^4\.2\.2 <r0@door\.send\.svc\.test>: mailbox full/) },
      { code: 452, text: expect.stringMatching(/^4\.2\.2 <r1@door\.send\.svc\.test>: mailbox full/) },
    ]);
    expect(full.data).toBeUndefined();
    expect(await bodiesOf(a.userId)).toHaveLength(8);

    // The shared body goes with its last mailbox row (expunge), and the space comes back.
    const store = env.stack.service.core.mailboxStore;
    const first = bodies[0]!.id;
    const holders = await db()
      .select({ uid: schema.mailboxMessages.uid, mailboxId: schema.mailboxMessages.mailboxId })
      .from(schema.mailboxMessages)
      .where(eq(schema.mailboxMessages.bodyId, first));
    for (const [i, h] of holders.entries()) {
      await store.setFlags(h.mailboxId, [h.uid], (f) => [...f, '\\Deleted']);
      expect(await store.expunge(h.mailboxId, [h.uid])).toEqual([h.uid]);
      const left = await db()
        .select({ id: schema.mailboxBodies.id })
        .from(schema.mailboxBodies)
        .where(eq(schema.mailboxBodies.id, first));
      expect(left).toHaveLength(i < holders.length - 1 ? 1 : 0);
    }
    expect((await usage(a.session)).used).toBe(QUOTA - MiB);
    // A MOVE (copy sharing the body, then the source row goes) stores nothing more and keeps the body.
    const second = bodies[1]!.id;
    const [h] = await db()
      .select({ uid: schema.mailboxMessages.uid, mailboxId: schema.mailboxMessages.mailboxId })
      .from(schema.mailboxMessages)
      .where(eq(schema.mailboxMessages.bodyId, second));
    const from = (await store.byId(h!.mailboxId))!;
    const sent = await store.ensure({
      userId: a.userId,
      domainId: from.domainId,
      address: from.address,
      folder: 'Sent',
    });
    expect(await store.copy(from.id, [h!.uid], sent, { share: true })).toHaveLength(1);
    await store.remove(from.id, [h!.uid]);
    expect(
      await db()
        .select({ uid: schema.mailboxMessages.uid })
        .from(schema.mailboxMessages)
        .where(eq(schema.mailboxMessages.bodyId, second)),
    ).toHaveLength(20);
    expect((await usage(a.session)).used).toBe(QUOTA - MiB);
    // RCPT reads the account again within a second.
    await eventually(async () => (await deliver([twenty[0]!], message(1000))).data?.code === 250 || undefined);
  });

  it("one stored copy per message: a clear message keeps no second raw copy; an encrypted domain's sealed copy counts against the quota", async () => {
    const a = await account('doorseal', true);
    expect((await deliver([`x@${a.domain}`, `y@${a.domain}`], message(100 * 1024))).data?.code).toBe(250);
    const [clear] = await db()
      .select({ content: schema.inboundRaw.content })
      .from(schema.inboundRaw)
      .innerJoin(schema.messages, eq(schema.messages.id, schema.inboundRaw.messageId))
      .where(eq(schema.messages.userId, a.userId));
    // The mailbox body is the copy (before: the same bytes again in inbound_raw, uncounted).
    expect(clear!.content.length).toBe(0);
    expect(await usage(a.session)).toMatchObject({ used: 100 * 1024 });

    const [dom] = await db()
      .select({ id: schema.domains.id })
      .from(schema.domains)
      .where(eq(schema.domains.domain, a.domain));
    const { publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const set = await env.stack.api('PUT', `/api/domains/${dom!.id}/encryption`, {
      token: a.session,
      body: { publicKey: publicKey.export({ type: 'spki', format: 'pem' }) },
    });
    expect(set.status).toBe(200);
    expect((await deliver([`x@${a.domain}`], message(200 * 1024))).data?.code).toBe(250);
    // No mailbox copy on an encrypted domain: the sealed bytes are what is stored, and they count.
    expect(await bodiesOf(a.userId)).toHaveLength(1);
    const used = (await usage(a.session)).used;
    expect(used).toBeGreaterThan(300 * 1024);
    // Once the quota is reached, an encrypted domain's mail is refused at the door like any other.
    const room = QUOTA - used;
    const over = await deliver([`x@${a.domain}`], message(room + 1));
    expect(over.data).toMatchObject({ code: 452, text: expect.stringMatching(/^4\.2\.2 .*storage quota/) });
  });

  it('an unverified account has a daily inbound allowance: past its bytes DATA answers 452 4.2.2, past its messages RCPT does', async () => {
    const b = await account('fresh', false);
    const to = [`hello@${b.domain}`];
    expect((await deliver(to, message(1000))).data?.code).toBe(250);
    expect((await deliver(to, message(40_000))).data?.code).toBe(250);
    // 41,000 + 40,000 bytes would pass the 65,536 bytes of the day.
    expect((await deliver(to, message(40_000))).data).toMatchObject({
      code: 452,
      text: expect.stringMatching(/^4\.2\.2 .*daily inbound allowance/),
    });
    expect((await deliver(to, message(ALLOWANCE.bytes + 1))).data).toMatchObject({
      code: 552,
      text: expect.stringMatching(/^5\.2\.2 .*daily inbound allowance/),
    });
    expect((await deliver(to, message(1000))).data?.code).toBe(250);
    // Three messages today: the next is refused at RCPT.
    const refused = await deliver(to, message(1000));
    expect(refused.rcpt).toEqual([
      {
        code: 452,
        text: expect.stringMatching(
          /^4\.2\.2 <hello@fresh\.send\.svc\.test>: daily inbound allowance of an unverified account used up/,
        ),
      },
    ]);
    const stored = await db()
      .select({ id: schema.messages.id })
      .from(schema.messages)
      .where(and(eq(schema.messages.userId, b.userId), eq(schema.messages.direction, 'inbound')));
    expect(stored).toHaveLength(3);
    // A verified address lifts the allowance (RCPT reads the account again within a second).
    await db().update(schema.users).set({ emailVerified: true }).where(eq(schema.users.id, b.userId));
    await eventually(async () => (await deliver(to, message(1000))).data?.code === 250 || undefined);
  });
});

describe('per-account caps', () => {
  it('contacts: creating past the cap is 403 contacts_limit (API, lists, imports, a send naming a sequence); an inbound sender past it is not recorded and the mail is accepted', async () => {
    const c = await account('capped', true);
    const api = (method: string, path: string, body?: unknown) => env.stack.api(method, path, { token: c.key, body });
    for (let i = 0; i < CAPS.contacts; i++)
      expect((await api('POST', '/api/contacts', { email: `c${i}@rcpt.test` })).status).toBe(201);
    expect(await api('POST', '/api/contacts', { email: 'one-more@rcpt.test' })).toMatchObject({
      status: 403,
      body: { code: 'contacts_limit', error: expect.stringContaining('cap of 3 contacts') },
    });
    const list = (await api('POST', '/api/lists', { name: 'capped' })).body;
    expect(
      await api('POST', `/api/lists/${list.id}/contacts`, { emails: ['c0@rcpt.test', 'new@rcpt.test'] }),
    ).toMatchObject({ status: 403, body: { code: 'contacts_limit' } });
    // Known addresses still join a list.
    expect((await api('POST', `/api/lists/${list.id}/contacts`, { emails: ['c0@rcpt.test'] })).body).toEqual({
      added: 1,
      created: 0,
    });
    // An import past the cap ends failed, the reason among its rejections.
    const started = await api('POST', `/api/lists/${list.id}/import`, {
      csv: 'email\nc1@rcpt.test\nimported@rcpt.test\n',
    });
    expect(started.status).toBe(202);
    const ended = await eventually(async () => {
      const r = (await api('GET', `/api/lists/${list.id}/imports/${started.body.id}`)).body;
      return r.status === 'running' ? undefined : r;
    });
    expect(ended).toMatchObject({
      status: 'failed',
      rejections: [{ row: 2, reason: expect.stringContaining('cap of 3 contacts') }],
    });
    // A send naming a sequence makes its recipients contacts: past the cap it is refused before anything is sent.
    const from = `Capped <hello@${c.domain}>`;
    expect(
      (
        await api('POST', '/api/sequences', {
          status: 'active',
          from,
          name: 'After',
          trigger: { type: 'send' },
          steps: [{ type: 'send', subject: 'Welcome', text: 'Hi' }],
        })
      ).status,
    ).toBe(201);
    expect(
      await api('POST', '/v1/send', {
        from,
        to: 'new-recipient@rcpt.test',
        subject: 'Hi',
        text: 'Hello',
        sequence: 'After',
      }),
    ).toMatchObject({ status: 403, body: { code: 'contacts_limit' } });

    expect(
      (await deliver([`desk@${c.domain}`], message(500, 'stranger@far.example'), 'stranger@far.example')).data?.code,
    ).toBe(250);
    expect((await deliver([`desk@${c.domain}`], message(500, 'c1@rcpt.test'), 'c1@rcpt.test')).data?.code).toBe(250);
    // The known sender's visit is recorded (last seen moves); the stranger is not.
    await eventually(async () => (await api('GET', '/api/contacts?search=c1@rcpt.test')).body[0]?.last_seen_at);
    await env.stack.service.core.contacts.flushTouches();
    expect((await api('GET', '/api/contacts?search=stranger')).body).toEqual([]);
    expect((await api('GET', '/api/contacts?limit=100')).body).toHaveLength(CAPS.contacts);
  });

  it('application events: recording past the cap is 403 events_limit', async () => {
    const e = await account('events', true);
    const post = (name: string) =>
      env.stack.api('POST', '/v1/events', { token: e.key, body: { name, email: 'someone@rcpt.test' } });
    for (let i = 0; i < CAPS.events; i++) expect((await post(`e${i}`)).status).toBe(202);
    expect(await post('one-more')).toMatchObject({
      status: 403,
      body: { code: 'events_limit', error: expect.stringContaining('cap of 2 application events') },
    });
    expect((await env.stack.api('GET', '/v1/events', { token: e.key })).body.events).toHaveLength(CAPS.events);
  });

  it('linked OAuth apps: approving past the cap is refused (400, the reason on the page); unlinking one makes room', async () => {
    const REDIRECT = 'http://127.0.0.1:9/cb';
    const owner = await verifiedAccount(env.stack, 'linker@example.com');
    const d = new ConsentDriver(env.stack);
    const approve = async () => {
      const client = await registerClient(env.stack, [REDIRECT]);
      const { verifier, challenge } = pkce();
      await d.open(
        authorizeUrl(env.stack, { clientId: client.client_id, redirectUri: REDIRECT, challenge, state: 's' }),
      );
      if (!d.html.includes('name="action" value="approve"'))
        await d.submit('login', { email: owner.email, password: owner.password });
      const res = await d.submit('approve');
      return { res, client, verifier };
    };
    const first = await approve();
    expect(first.res.status).toBe(303);
    const code = new URL(first.res.headers.get('location')!).searchParams.get('code')!;
    const t = await tokenRequest(env.stack, {
      grant_type: 'authorization_code',
      code,
      redirect_uri: REDIRECT,
      client_id: first.client.client_id,
      code_verifier: first.verifier,
    });
    expect(t.status).toBe(200);
    // The consent page answers the refusal as its other refusals of a form (400, the reason on the page).
    const second = await approve();
    expect(second.res.status).toBe(400);
    expect(d.html).toContain('cap of 1 linked apps');
    // Unlinking the first app makes room for another.
    const grants = (await env.stack.api('GET', '/api/oauth/grants', { token: t.body.access_token })).body;
    expect(grants).toHaveLength(1);
    expect(
      (await env.stack.api('DELETE', `/api/oauth/grants/${grants[0].id}`, { token: t.body.access_token })).status,
    ).toBe(200);
    expect((await approve()).res.status).toBe(303);
  });
});
