import { generateKeyPairSync } from 'node:crypto';
import { eq } from 'drizzle-orm';
import nodemailer from 'nodemailer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { operations } from '../api/ops/index.js';
import type { Operation } from '../api/contract.js';
import type { CredentialKind } from '../core/tenancy.js';
import { schema } from '../db/index.js';
import { approveOverHttp, authorizeUrl, pkce, registerClient, tokenRequest } from './helpers/oauth.js';
import { eventually, startStack, type TestStack } from './helpers/stack.js';
import { startWebhookReceiver } from './helpers/webhook-receiver.js';

/**
 * The tenancy walk: every registered operation, called on account A's resources with (1) a scoped key
 * of A's OTHER domain and (2) another account's credential. Built from the operation list itself, so a
 * new route is walked without anyone adding it here; a path parameter the walk does not know fails it.
 */
const SERVICE = 'tenancy.svc.test';
const PUBLIC_KEY = generateKeyPairSync('rsa', { modulusLength: 2048 })
  .publicKey.export({ type: 'spki', format: 'pem' })
  .toString();
let stack: TestStack;
let hooks: Awaited<ReturnType<typeof startWebhookReceiver>>;
const a = {} as Record<string, string>; // A's resources
const b = {} as Record<string, string>; // B's credentials

async function signup(email: string) {
  const s = (await stack.api('POST', '/api/auth/signup', { body: { email, password: 'tenancy password' } })).body;
  await stack.service.core.db.update(schema.users).set({ emailVerified: true }).where(eq(schema.users.id, s.user.id));
  const key = (await stack.api('GET', '/api/keys', { token: s.token })).body.key as string;
  return { session: s.token as string, key, user: s.user.id as string };
}
const ok = <T>(res: { status: number; body: T }) => {
  expect(res.status, JSON.stringify(res.body)).toBeLessThan(300);
  return res.body as any;
};

beforeAll(async () => {
  hooks = await startWebhookReceiver();
  stack = await startStack({ SERVICE_DOMAIN: SERVICE });
  const A = await signup('tenant-a@example.com');
  const B = await signup('tenant-b@example.com');
  Object.assign(b, { session: B.session, key: B.key, domainName: `tenant-b-one.${SERVICE}` });
  a.session = A.session;
  a.key = A.key;
  a.domain = ok(
    await stack.api('POST', '/api/domains/subdomain', { token: A.session, body: { subdomain: 'tenant-a-one' } }),
  ).domain.id;
  a.domainName = `tenant-a-one.${SERVICE}`;
  a.other = ok(
    await stack.api('POST', '/api/domains/subdomain', { token: A.session, body: { subdomain: 'tenant-a-two' } }),
  ).domain.id;
  ok(await stack.api('POST', '/api/domains/subdomain', { token: B.session, body: { subdomain: 'tenant-b-one' } }));
  b.list = ok(await stack.api('POST', '/api/lists', { token: B.session, body: { name: 'B list' } })).id;
  a.otherScoped = ok(
    await stack.api('POST', '/api/keys/scoped', { token: A.session, body: { domainId: a.other } }),
  ).key;
  a.scopedKeyId = ok(
    await stack.api('POST', '/api/keys/scoped', { token: A.session, body: { domainId: a.domain } }),
  ).id;
  a.hookSecret = ok(
    await stack.api('PUT', `/api/domains/${a.domain}/webhook`, { token: A.session, body: { url: `${hooks.base}/a` } }),
  ).signingSecret;
  a.route = ok(
    await stack.api('POST', '/api/routes', {
      token: A.session,
      body: { domainId: a.domain, address: 'ops', url: `${hooks.base}/ops` },
    }),
  ).id;
  a.accountSecret = ok(
    await stack.api('PUT', `/api/domains/${a.domain}/tracking-webhook`, {
      token: A.session,
      body: { url: `${hooks.base}/track` },
    }),
  ).signingSecret;
  a.template = ok(
    await stack.api('POST', '/api/templates', {
      token: A.session,
      body: { name: 'A only', subject: 'Hi', text: 'secret template text' },
    }),
  ).id;
  a.suppressed = 'a-suppressed@example.com';
  ok(
    await stack.api('POST', '/api/contacts/suppressions', {
      token: A.session,
      body: { email: a.suppressed, reason: 'manual' },
    }),
  );
  const from = `hello@${a.domainName}`;
  a.message = ok(
    await stack.api('POST', '/v1/send', {
      token: A.key,
      body: { from, to: 'r@example.com', subject: 'A private subject', text: 't' },
    }),
  ).id;
  a.scheduled = ok(
    await stack.api('POST', '/v1/send', {
      token: A.key,
      body: { from, to: 'r@example.com', subject: 's', text: 't', scheduledAt: 'in 2 hours' },
    }),
  ).id;
  const smtp = nodemailer.createTransport({
    host: '127.0.0.1',
    port: stack.service.smtpPort!,
    secure: false,
    ignoreTLS: true,
  });
  await smtp.sendMail({ from: 'x@far.example', to: `in@${a.domainName}`, subject: 'A inbound', text: 'hi' });
  const [hit] = await hooks.waitFor('/a');
  a.inbound = hit!.json.id;
  a.delivery = await eventually(
    async () =>
      ok(await stack.api('GET', `/api/messages/${a.inbound}`, { token: A.session })).deliveries?.[0]?.id as string,
  );
  // A sender rule of A's domain, and a held message of A (as the inbound policy holds it: a message row `held`).
  a.senderRule = ok(
    await stack.api('POST', `/api/domains/${a.domain}/sender-rules`, {
      token: A.session,
      body: { kind: 'address', value: 'a-blocked@example.com', action: 'block' },
    }),
  ).rule.id;
  a.held = 'msg_tenancyheldofaccounta0';
  await stack.service.core.db.insert(schema.messages).values({
    id: a.held,
    userId: A.user,
    direction: 'inbound',
    kind: 'user',
    domainId: a.domain,
    fromAddr: 'held@far.example',
    toAddrs: [`in@${a.domainName}`],
    subject: 'A held subject',
    status: 'held',
    heldReason: 'spam score 9 at or above 5',
    heldUntil: Date.now() + 86_400_000,
    createdAt: Date.now(),
    updatedAt: Date.now(),
  });
  // Mailboxes, linked apps, contacts, lists, imports and broadcasts of A.
  const pw = ok(
    await stack.api('POST', '/api/app-passwords', {
      token: A.session,
      body: { domainId: a.domain, protocols: ['api'] },
    }),
  );
  a.appPassword = pw.id;
  a.mailboxUid = String(
    await eventually(
      async () => ok(await stack.api('GET', '/api/mailbox/messages', { token: pw.secret })).messages?.[0]?.uid,
    ),
  );
  const redirectUri = 'http://127.0.0.1:9/tenancy/cb';
  const { client_id: clientId } = await registerClient(stack, [redirectUri], 'Tenancy app');
  const { verifier, challenge } = pkce();
  const back = await approveOverHttp(stack, authorizeUrl(stack, { clientId, redirectUri, challenge }), {
    email: 'tenant-a@example.com',
    password: 'tenancy password',
  });
  const tokens = await tokenRequest(stack, {
    grant_type: 'authorization_code',
    code: back.searchParams.get('code')!,
    redirect_uri: redirectUri,
    client_id: clientId,
    code_verifier: verifier,
  });
  a.grant = (
    ok(await stack.api('GET', '/api/oauth/grants', { token: tokens.body.access_token })) as { id: string }[]
  )[0]!.id;
  a.contact = ok(
    await stack.api('POST', '/api/contacts', { token: A.session, body: { email: 'a-contact@example.com' } }),
  ).id;
  a.list = ok(await stack.api('POST', '/api/lists', { token: A.session, body: { name: 'A list' } })).id;
  ok(await stack.api('POST', `/api/lists/${a.list}/contacts`, { token: A.session, body: { contactIds: [a.contact] } }));
  a.import = ok(
    await stack.api('POST', `/api/lists/${a.list}/import`, {
      token: A.session,
      body: { csv: 'email\nimported@example.com\n' },
    }),
  ).id;
  a.broadcast = ok(
    await stack.api('POST', '/api/broadcasts', {
      token: A.session,
      body: { from: `news@${a.domainName}`, subject: 'A news', text: 'x', audience: { type: 'list', id: a.list } },
    }),
  ).id;
  a.sequence = ok(
    await stack.api('POST', '/api/sequences', {
      token: A.session,
      body: {
        name: 'A sequence',
        status: 'active',
        from: `drip@${a.domainName}`,
        trigger: { type: 'event', event: 'a-start' },
        steps: [{ type: 'wait_for_event', event: 'a-never', timeout: '1h' }],
      },
    }),
  ).id;
  a.event = ok(
    await stack.api('POST', '/v1/events', {
      token: A.key,
      body: { name: 'a-start', contactId: a.contact, payload: { secret: 'A event payload' } },
    }),
  ).id;
  a.enrolment = await eventually(
    async () =>
      ok(await stack.api('GET', `/api/sequences/${a.sequence}/enrolments`, { token: A.session }))[0]?.id as string,
  );
});
afterAll(async () => {
  await stack?.stop();
  await hooks?.close();
});

/** A's resource for each path parameter of each resource family. */
function pathOf(op: Operation): string {
  return op.path.replace(/:([A-Za-z]+)/g, (_m, param: string) => {
    const family = op.path
      .split('/')
      .slice(0, op.path.split('/').indexOf(`:${param}`))
      .join('/');
    const ids: Record<string, string> = {
      '/api/domains': a.domain!,
      '/api/domains/:id/sender-rules': a.senderRule!,
      '/api/inbound/held': a.held!,
      '/api/messages': a.message!,
      '/api/deliveries': a.delivery!,
      '/api/routes': a.route!,
      '/v1/scheduled': a.scheduled!,
      '/api/templates': a.template!,
      '/api/keys/scoped': a.scopedKeyId!,
      '/api/contacts/suppressions': a.suppressed!,
      '/api/app-passwords': a.appPassword!,
      '/api/mailbox/messages': a.mailboxUid!,
      '/api/oauth/grants': a.grant!,
      '/api/contacts': a.contact!,
      '/api/lists': a.list!,
      '/api/lists/:id/contacts': a.contact!,
      '/api/lists/:id/imports': a.import!,
      '/api/broadcasts': a.broadcast!,
      '/api/sequences': a.sequence!,
      '/api/enrolments': a.enrolment!,
    };
    const id = ids[family];
    if (!id) throw new Error(`the tenancy walk does not know ":${param}" of ${op.path}: add A's resource for it`);
    return encodeURIComponent(id);
  });
}

/** Bodies that point at A's resources; other operations get an empty body. */
const bodies = (): Record<string, unknown> => ({
  'routes.create': { domainId: a.domain, address: 'steal', url: `${hooks.base}/steal` },
  'scopedKeys.create': { domainId: a.domain },
  'deliveries.retryMany': { deliveryIds: [a.delivery], messageIds: [a.inbound] },
  'webhooks.set': { url: `${hooks.base}/steal` },
  'engagement.setTrackingWebhook': { url: `${hooks.base}/steal` },
  'engagement.setWebhookEvents': { events: 'all' },
  'templates.update': { name: 'stolen' },
  'lists.update': { name: 'stolen' },
  'sequences.update': { name: 'stolen', status: 'paused' },
  'events.post': { name: 'a-start', contactId: a.contact },
  'lists.addContacts': { emails: ['steal@example.com'] },
  'lists.import': { csv: 'email\nsteal@example.com\n' },
  'appPasswords.create': { domainId: a.domain, protocols: ['api'] },
  'domains.setEncryption': { publicKey: PUBLIC_KEY },
  'domains.update': { zero_retention: 1, track_opens: 1 },
  'inboundPolicy.update': { spam_hold_score: 1 },
  'senderRules.create': { kind: 'address', value: 'steal@example.com', action: 'allow' },
  'send.single': { from: `x@${a.domainName}`, to: 'v@example.com', subject: 's', text: 't' },
  'send.batch': { from: `x@${a.domainName}`, subject: 's', text: 't', recipients: [{ to: 'v@example.com' }] },
});

/** Strings only A (and, for the scoped key, only A's first domain) may see. */
const secretsOfA = (forScopedKey: boolean) =>
  [
    a.domain,
    a.domainName,
    a.message,
    a.inbound,
    a.delivery,
    a.route,
    a.scheduled,
    a.scopedKeyId,
    a.hookSecret,
    a.accountSecret,
    a.sequence,
    'A sequence',
    a.senderRule,
    a.held,
    'A held subject',
    a.enrolment,
    a.event,
    'A event payload',
    ...(forScopedKey ? [] : [a.template, 'secret template text', a.suppressed, 'tenant-a@example.com', a.key]),
  ].filter(Boolean) as string[];

/** B's credential of a kind the operation takes (its key read fresh: the walk itself rotates it). */
async function credentialFor(op: Operation, who: 'other-account' | 'other-domain'): Promise<string | undefined> {
  const kinds = op.auth as readonly CredentialKind[];
  if (who === 'other-domain') return a.otherScoped;
  if (kinds.includes('session')) return b.session;
  return (await stack.api('GET', '/api/keys', { token: b.session })).body.key;
}

// auth.signout acts on the caller's own account only (it would end B's sessions mid-walk): checked on its own below.
const walked = operations.filter((op) => op.auth !== 'public' && op.name !== 'auth.signout');

describe.each([['other-account'], ['other-domain']] as const)('the tenancy walk with a credential of an %s', (who) => {
  it.each(walked.map((op) => [op.name, op] as const))('%s cannot reach A', async (_name, op) => {
    const body = bodies()[op.name] ?? (op.body ? {} : undefined);
    const path = pathOf(op);
    const res = await stack.api(op.method, path, { token: await credentialFor(op, who), body });
    const text = JSON.stringify(res.body ?? '');
    // What the caller sent may come back (an error naming the domain it asked for); nothing else of A may.
    const asked = decodeURIComponent(path) + JSON.stringify(body ?? '');
    for (const secret of secretsOfA(who === 'other-domain').filter((x) => !asked.includes(x)))
      expect(text, `${op.name} leaked ${secret}`).not.toContain(secret);
    if (!op.path.includes(':') && !(op.name in bodies())) return; // names nothing of A: only the leak check applies
    expect(res.body?.code, `${op.name}: give the walk a valid body`).not.toBe('validation_error');
    if (!op.path.includes(':') && op.name === 'deliveries.retryMany') {
      // SPEC.md answers the bulk retry 200 whatever its ids: every id of A must come back as one not found.
      expect(res.status, text).toBe(200);
      expect(res.body, text).toMatchObject({ ok: false, delivered: 0, failed: 0, skipped: res.body.requested });
      for (const r of res.body.results) expect(['not_found', 'no_delivery'], text).toContain(r.reason);
      return;
    }
    if (!op.path.includes(':')) {
      // A only named in the body (send, batch, scoped keys, routes, events): a 2xx would have acted on A's
      // resource or in A's name, whatever the answer says; it must be refused as a path naming A would be.
      expect([403, 404], `${op.name}: ${res.status} ${text}`).toContain(res.status);
      return;
    }
    if (who === 'other-account') {
      // Another account: A's resources do not exist for it (403 only where the credential kind is not taken at all).
      expect(
        [404, ...(res.body?.code === 'wrong_credential' ? [403] : [])],
        `${op.name}: ${res.status} ${text}`,
      ).toContain(res.status);
    } else {
      expect([403, 404], `${op.name}: ${res.status} ${text}`).toContain(res.status);
    }
  });
});

/**
 * B acting on its own verified domain and list while naming one of A's resources in the body: each must be
 * refused as if A's id did not exist (a 2xx would render A's template, enroll into A's sequence, mail A's
 * list or copy A's contact), and nothing of A may come back.
 */
const crossReferences = (): [string, string, string, Record<string, unknown>][] => [
  [
    "send naming A's template",
    'POST',
    '/v1/send',
    { from: `x@${b.domainName}`, to: 'v@example.com', templateId: a.template },
  ],
  [
    "send naming A's sequence by id",
    'POST',
    '/v1/send',
    { from: `x@${b.domainName}`, to: 'v@example.com', subject: 's', text: 't', sequence: a.sequence },
  ],
  [
    "send naming A's sequence by name",
    'POST',
    '/v1/send',
    { from: `x@${b.domainName}`, to: 'v@example.com', subject: 's', text: 't', sequence: 'A sequence' },
  ],
  [
    "batch naming A's template",
    'POST',
    '/v1/send/batch',
    { from: `x@${b.domainName}`, templateId: a.template, recipients: [{ to: 'v@example.com' }] },
  ],
  [
    "broadcast to A's list",
    'POST',
    '/api/broadcasts',
    { from: `news@${b.domainName}`, subject: 's', text: 'x', audience: { type: 'list', id: a.list } },
  ],
  ["broadcast with A's template", 'POST', '/api/broadcasts', { from: `news@${b.domainName}`, templateId: a.template }],
  ["A's contact added to B's list", 'POST', `/api/lists/${b.list}/contacts`, { contactIds: [a.contact] }],
  ["event on A's contact", 'POST', '/v1/events', { name: 'a-start', contactId: a.contact }],
];

describe("naming A only in the body of a call on B's own resources", () => {
  it('B sends from its own domain (so the refusals below are about A)', async () => {
    const key = await credentialFor({ auth: ['account_key'] } as unknown as Operation, 'other-account');
    ok(
      await stack.api('POST', '/v1/send', {
        token: key,
        body: { from: `x@${b.domainName}`, to: 'v@example.com', subject: 's', text: 't' },
      }),
    );
  });

  it.each(crossReferences().map(([label]) => [label]))('%s is refused', async (label) => {
    const [, method, path, body] = crossReferences().find(([l]) => l === label)!;
    const token = path.startsWith('/v1/')
      ? await credentialFor({ auth: ['account_key'] } as unknown as Operation, 'other-account')
      : b.session;
    const res = await stack.api(method, path, { token, body });
    const text = JSON.stringify(res.body ?? '');
    expect(res.body?.code, `${label}: give the case a valid body`).not.toBe('validation_error');
    // Refused for what it names (template_not_found, sequence_not_found, …), not for B's domain or credential.
    expect(res, `${label}: ${res.status} ${text}`).toMatchObject({
      status: 404,
      body: { code: expect.stringMatching(/not_found$/) },
    });
    const asked = JSON.stringify(body);
    for (const secret of secretsOfA(false).filter((x) => !asked.includes(x)))
      expect(text, `${label} leaked ${secret}`).not.toContain(secret);
  });
});

describe('after the walk', () => {
  it("A's resources are untouched", async () => {
    const A = a.session!;
    expect((await stack.api('GET', `/api/domains/${a.domain}`, { token: A })).status).toBe(200);
    expect((await stack.api('GET', `/api/templates/${a.template}`, { token: A })).body.name).toBe('A only');
    expect((await stack.api('GET', `/v1/scheduled/${a.scheduled}`, { token: a.key })).body.status).toBe('scheduled');
    expect((await stack.api('GET', '/api/routes', { token: A })).body.map((r: any) => r.id)).toContain(a.route);
    expect(
      (await stack.api('GET', '/api/contacts/suppressions', { token: A })).body.map((s: any) => s.email),
    ).toContain(a.suppressed);
    expect((await stack.api('GET', '/api/keys/scoped', { token: A })).body.map((k: any) => k.id)).toContain(
      a.scopedKeyId,
    );
    expect((await stack.api('GET', `/api/domains/${a.domain}/webhook/secret`, { token: A })).body.secret).toBe(
      a.hookSecret,
    );
    expect(hooks.hitsOn('/steal')).toHaveLength(0);
    expect((await stack.api('GET', `/api/messages/${a.inbound}`, { token: A })).body.deliveries).toHaveLength(1);
    expect((await stack.api('GET', `/api/domains/${a.domain}`, { token: A })).body.domain).toMatchObject({
      enc_public_key: null,
      zero_retention: 0,
      track_opens: 0,
    });
    expect((await stack.api('GET', `/api/lists/${a.list}`, { token: A })).body.name).toBe('A list');
    expect((await stack.api('GET', `/api/broadcasts/${a.broadcast}`, { token: A })).body.status).toBe('draft');
    expect((await stack.api('GET', '/api/app-passwords', { token: A })).body.map((p: any) => p.id)).toContain(
      a.appPassword,
    );
    expect((await stack.api('GET', `/api/sequences/${a.sequence}`, { token: A })).body).toMatchObject({
      name: 'A sequence',
      status: 'active',
      version: 1,
    });
    expect((await stack.api('GET', `/api/enrolments/${a.enrolment}`, { token: A })).body).toMatchObject({
      status: 'running',
      live: true,
    });
    expect((await stack.api('GET', '/v1/events', { token: a.key })).body.events.map((e: any) => e.id)).toEqual([
      a.event,
    ]);
  });

  it('a scoped key configuring its own domain gets the account secret SPEC.md answers there, and nothing of the other domain', async () => {
    // SPEC.md: both responses carry signingSecret (the account secret) and domain routes take a scoped key.
    const set = await stack.api('PUT', `/api/domains/${a.other}/tracking-webhook`, {
      token: a.otherScoped,
      body: { url: `${hooks.base}/own` },
    });
    expect(set.status).toBe(200);
    expect(set.body.signingSecret).toBe(a.accountSecret);
    const events = await stack.api('PUT', `/api/domains/${a.other}/webhook-events`, {
      token: a.otherScoped,
      body: { events: 'all' },
    });
    expect(events.status).toBe(200);
    expect(events.body.signingSecret).toBe(a.accountSecret);
    for (const body of [set.body, events.body])
      for (const x of [a.domain, a.domainName, a.hookSecret]) expect(JSON.stringify(body)).not.toContain(x);
  });

  it('a scoped key reads only its own domain on /api/events and /api/messages', async () => {
    const events = (await stack.api('GET', '/api/events', { token: a.otherScoped })).body as any[];
    expect(events.every((e) => e.messageId !== a.message && e.messageId !== a.inbound)).toBe(true);
    const own = (await stack.api('GET', '/api/events', { token: a.session })).body as any[];
    expect(own.some((e) => e.messageId === a.message)).toBe(true);
  });

  it("signing out ends the caller's sessions only, never another account's", async () => {
    const other = await signup('tenant-c@example.com');
    const second = (
      await stack.api('POST', '/api/auth/login', {
        body: { email: 'tenant-c@example.com', password: 'tenancy password' },
      })
    ).body.token;
    expect((await stack.api('POST', '/api/auth/signout', { token: other.session, body: {} })).status).toBe(200);
    expect((await stack.api('GET', '/api/keys', { token: other.session })).status).toBe(401);
    expect((await stack.api('GET', '/api/keys', { token: second })).status).toBe(401);
    expect((await stack.api('GET', '/api/keys', { token: other.key })).status).toBe(200); // keys are not sessions
    expect((await stack.api('GET', `/api/domains/${a.domain}`, { token: a.session })).status).toBe(200);
    expect((await stack.api('POST', '/api/auth/signout', { token: other.key, body: {} })).body.code).toBe(
      'wrong_credential',
    );
  });
});
