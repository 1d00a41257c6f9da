import { and, eq, inArray, sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type * as secrets from '../core/secrets.js';
import { schema } from '../db/index.js';
import { authorizeUrl, ConsentDriver, pkce, registerClient } from './helpers/oauth.js';
import { tokenFromMail, waitForMail } from './helpers/outbox.js';
import { eventually, startStack, type TestStack } from './helpers/stack.js';

/**
 * Issue 29's sign-in findings, walked over real HTTP as an attacker would: a burst of guesses checks no
 * more than the limit, failures from elsewhere never lock the owner out of the mailed link, and a sign-in
 * or reset link on an address never proven revokes what a squatter made before (docs/accounts.md).
 */
/**
 * Password checks, held while `hold` is set: the service runs in this process, so the test can see how
 * many passwords a burst got checked, and hold the checks until the whole burst has arrived (on a loaded
 * machine the hashes of the first guesses could otherwise end before the last guesses arrive).
 */
const checks = vi.hoisted(() => ({ hold: undefined as Promise<void> | undefined, started: 0 }));
vi.mock('../core/secrets.js', async (importOriginal) => {
  const real = await importOriginal<typeof secrets>();
  return {
    ...real,
    async verifyPassword(password: string, stored: string | null) {
      if (checks.hold) {
        checks.started += 1;
        await checks.hold;
      }
      return real.verifyPassword(password, stored);
    },
  };
});

const SERVICE = 'signin-abuse.svc.test';
const LOGIN_LIMIT = 10; // failed sign-ins per address per 15 minutes (core/accounts.ts)
let stack: TestStack;
beforeAll(async () => {
  stack = await startStack({ SERVICE_DOMAIN: SERVICE });
});
afterAll(async () => {
  await stack?.stop();
});

const me = (token: string) => stack.api('GET', '/v1/me', { token });
const post = (path: string, body: unknown, token?: string) =>
  fetch(`${stack.baseUrl}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify(body),
  });
const verifyToken = async (email: string) => tokenFromMail((await waitForMail(stack, email, /Verify/)).raw);
/** Every mail captured for `to` whose subject matches, once there are `count` of them. */
async function mailsTo(to: string, subject: RegExp, count: number) {
  return eventually(async () => {
    const rows = (
      await stack.service.core.db
        .select()
        .from(schema.outbox)
        .where(sql`${schema.outbox.envelopeTo} @> ${JSON.stringify([to])}::jsonb`)
    ).filter((r) => subject.test(r.subject ?? ''));
    return rows.length >= count ? rows : undefined;
  });
}

describe('a login attempt is counted before its password is checked', () => {
  it('of 100 concurrent wrong passwords and then the right one, at most the limit are checked and the right one gets no session', async () => {
    const email = 'burst-owner@example.com';
    const password = 'the right password';
    expect((await stack.api('POST', '/api/auth/signup', { body: { email, password } })).status).toBe(201);
    let release!: () => void;
    checks.hold = new Promise<void>((resolve) => {
      release = resolve;
    });
    checks.started = 0;
    let answered = 0;
    const attempt = (pw: string) =>
      post('/api/auth/login', { email, password: pw }).then((r) => {
        answered += 1;
        return r.status;
      });
    try {
      const wrong = Array.from({ length: 100 }, (_, i) => attempt(`wrong guess ${i}`));
      // Every guess has arrived: each is either answered or waiting on its password check.
      await eventually(async () => answered + checks.started === 100);
      const right = attempt(password);
      await eventually(async () => answered + checks.started === 101);
      release();
      const [statuses, rightStatus] = await Promise.all([Promise.all(wrong), right]);
      expect(checks.started).toBeLessThanOrEqual(LOGIN_LIMIT);
      expect(statuses.filter((s) => s === 401)).toHaveLength(checks.started);
      expect(statuses.every((s) => s === 401 || s === 429)).toBe(true);
      expect(rightStatus).toBe(429);
    } finally {
      release();
      checks.hold = undefined;
    }
    // While the address is locked the right password is refused too.
    expect((await post('/api/auth/login', { email, password })).status).toBe(429);
  });

  it('a concurrent burst of wrong app passwords on the mailbox API checks at most LOGIN_MAX_FAILURES', async () => {
    const key = (await stack.api('POST', '/api/v1/provision', { body: { email: 'mailbox-burst@example.com' } })).body
      .api_key;
    const domain = (await stack.api('POST', '/api/domains/subdomain', { token: key, body: { subdomain: 'burst-box' } }))
      .body.domain;
    const good = (
      await stack.api('POST', '/api/app-passwords', { token: key, body: { domain: domain.domain, protocols: ['api'] } })
    ).body.secret;
    const list = (secret: string) =>
      fetch(`${stack.baseUrl}/api/mailbox/messages`, { headers: { authorization: `Bearer ${secret}` } });
    const wrong = Array.from({ length: 60 }, (_, i) => list(`svc_pw_${'x'.repeat(30)}${String(i).padStart(2, '0')}`));
    const right = list(good);
    const statuses = (await Promise.all(wrong)).map((r) => r.status);
    expect(statuses.filter((s) => s === 401).length).toBeLessThanOrEqual(stack.config.login.maxFailures);
    expect((await right).status).toBe(429);
    // The loopback client is locked out of mailbox logins now; the tests below use the mailbox API from it too.
    await stack.service.core.db
      .delete(schema.rateLimitWindows)
      .where(eq(schema.rateLimitWindows.name, 'mailbox_login'));
  });
});

describe('failures from elsewhere never lock the owner out of every sign-in path', () => {
  it("with the password path locked and the address's mail budget used up by others, the last link mailed still signs the owner in", async () => {
    const email = 'locked-owner@example.com';
    const password = 'owner password 1';
    const up = (await stack.api('POST', '/api/auth/signup', { body: { email, password } })).body;
    await stack.api('POST', '/api/auth/verify', { body: { token: await verifyToken(email) } });
    // Someone else locks the password path with wrong guesses, then asks for every sign-in mail the address may be sent.
    for (let i = 0; i < LOGIN_LIMIT; i++)
      expect((await post('/api/auth/login', { email, password: `guess ${i}` })).status).toBe(401);
    expect((await post('/api/auth/login', { email, password })).status).toBe(429);
    for (let i = 0; i < 5; i++) expect((await post('/api/auth/signin-link', { email })).status).toBe(200);
    expect((await post('/api/auth/signin-link', { email })).status).toBe(429); // the inbox is not flooded
    const links = (await mailsTo(email, /sign-in link/, 5)).map((m) => tokenFromMail(m.raw));

    // 20 minutes later (past a sign-in link's 15): the address's mail window (an hour) still refuses a new link.
    const back = 20 * 60_000;
    const { db } = stack.service.core;
    await db
      .update(schema.authTokens)
      .set({
        createdAt: sql`${schema.authTokens.createdAt} - ${back}`,
        expiresAt: sql`${schema.authTokens.expiresAt} - ${back}`,
      })
      .where(eq(schema.authTokens.userId, up.user.id));
    await db
      .update(schema.rateLimitWindows)
      .set({ windowStart: sql`${schema.rateLimitWindows.windowStart} - ${back}` })
      .where(and(eq(schema.rateLimitWindows.name, 'mail'), eq(schema.rateLimitWindows.key, `signin|${email}`)));
    expect((await post('/api/auth/signin-link', { email })).status).toBe(429);

    // The owner follows the links in the inbox: the one that used up the budget still works.
    const answers = [];
    for (const token of links) answers.push(await post('/api/auth/signin', { token }));
    const signedIn = answers.filter((r) => r.status === 200);
    expect(signedIn).toHaveLength(1);
    const session = ((await signedIn[0]!.json()) as { token: string }).token;
    expect((await me(session)).body).toMatchObject({ email, emailVerified: true });
  });
});

describe('a sign-in or reset link on an address never proven revokes what was made before', () => {
  /** A squatter provisions the victim's address and makes more credentials with the key it was answered. */
  async function squat(email: string, subdomain: string) {
    const key: string = (await stack.api('POST', '/api/v1/provision', { body: { email } })).body.api_key;
    const domain = (await stack.api('POST', '/api/domains/subdomain', { token: key, body: { subdomain } })).body.domain;
    const scoped = (
      await stack.api('POST', '/api/keys/scoped', { token: key, body: { domainId: domain.id, name: 'squatter ci' } })
    ).body;
    const appPassword: string = (
      await stack.api('POST', '/api/app-passwords', {
        token: key,
        body: { domain: domain.domain, protocols: ['api'], label: 'squatter phone' },
      })
    ).body.secret;
    for (const t of [key, scoped.key]) expect((await me(t)).status).toBe(200);
    expect((await stack.api('GET', '/api/mailbox/messages', { token: appPassword })).status).toBe(200);
    return { key, scoped: scoped.key as string, scopedId: scoped.id as string, appPassword };
  }

  it("a password reset: the reset page lists the squatter's keys, and after the reset none of them works", async () => {
    const email = 'reset-victim@example.com';
    const squatter = await squat(email, 'reset-squat');
    await stack.api('POST', '/api/auth/password/forgot', { body: { email } });
    const token = tokenFromMail((await waitForMail(stack, email, /Reset/)).raw);
    const page = await fetch(`${stack.baseUrl}/auth/reset?token=${token}`).then((r) => r.text());
    for (const text of [
      'Revoked when you continue',
      'The account API key',
      'Domain-scoped key “squatter ci”',
      'App password “squatter phone”',
    ])
      expect(page).toContain(text);
    expect(
      (await stack.api('GET', `/api/auth/link?token=${token}`)).body.credentials
        .map((c: { kind: string }) => c.kind)
        .sort(),
    ).toEqual(['account_key', 'app_password', 'scoped_key']);

    const reset = await stack.api('POST', '/api/auth/password/reset', {
      body: { token, password: 'victim password 1' },
    });
    expect(reset.status).toBe(200);
    expect(reset.body.user.emailVerified).toBe(true);
    for (const t of [squatter.key, squatter.scoped]) expect((await me(t)).status).toBe(401);
    expect((await stack.api('GET', '/api/mailbox/messages', { token: squatter.appPassword })).status).toBe(401);
    // The owner's session works, and the account key they read now is a new one.
    const fresh = (await stack.api('GET', '/api/keys', { token: reset.body.token })).body.key;
    expect(fresh).not.toBe(squatter.key);
    expect((await me(fresh)).body).toMatchObject({ email, emailVerified: true });
  });

  it('a mailed-link sign-in from the page: every credential is ticked; the one the owner unticks is kept, the rest stop', async () => {
    const email = 'signin-victim@example.com';
    const squatter = await squat(email, 'signin-squat');
    await stack.api('POST', '/api/auth/signin-link', { body: { email } });
    const token = tokenFromMail((await waitForMail(stack, email, /sign-in link/)).raw);
    const b = new ConsentDriver(stack);
    await b.open(`/auth/signin?token=${token}`);
    const form = /<form method="post" action="\/auth\/signin"[\s\S]*?<\/form>/.exec(b.html)![0];
    const hidden = Object.fromEntries(
      [...form.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)].map((m) => [m[1]!, m[2]!]),
    );
    const boxes = [...form.matchAll(/<input type="checkbox" name="revoke" value="([^"]+)" checked>/g)].map(
      (m) => m[1]!,
    );
    expect(boxes).toHaveLength(3);
    expect(boxes).toContain(squatter.scopedId);
    // The owner recognises the scoped key (say, made from their own CI) and unticks it; the other boxes stay ticked.
    const ticked = boxes.filter((id) => id !== squatter.scopedId);
    const body = new URLSearchParams(hidden);
    for (const id of ticked) body.append('revoke', id);
    const res = await fetch(`${stack.baseUrl}/auth/signin`, {
      method: 'POST',
      body,
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        cookie: [...b.cookies].map(([k, v]) => `${k}=${v}`).join('; '),
      },
    });
    expect(res.status).toBe(200);
    expect(await res.text()).toContain('Signed in');
    expect((await me(squatter.key)).status).toBe(401);
    expect((await stack.api('GET', '/api/mailbox/messages', { token: squatter.appPassword })).status).toBe(401);
    expect((await me(squatter.scoped)).body).toMatchObject({ email, emailVerified: true });
  });

  it("on an app's consent page: the emailed link lists the stranger's password and sessions, ticked, and continuing ends them", async () => {
    const email = 'consent-victim@example.com';
    const client = await registerClient(stack, ['http://127.0.0.1:9/cb'], 'Linker');
    const url = authorizeUrl(stack, {
      clientId: client.client_id,
      redirectUri: 'http://127.0.0.1:9/cb',
      challenge: pkce().challenge,
      state: 's',
    });
    const stranger = new ConsentDriver(stack);
    await stranger.open(url);
    await stranger.submit('signup', { email, password: 'stranger password' });
    expect(stranger.html).toContain('Verify your email to continue');

    const owner = new ConsentDriver(stack);
    await owner.open(url);
    await owner.submit('link', { email });
    const token = tokenFromMail((await waitForMail(stack, email, /sign-in link/)).raw);
    await owner.open(`${url}&login_token=${token}`);
    expect(owner.html).toContain('revokes the credentials ticked below');
    const boxes = [...owner.html.matchAll(/<input type="checkbox" name="revoke" value="([^"]+)" checked>/g)].map(
      (m) => m[1]!,
    );
    expect(boxes.sort()).toEqual(['password', 'sessions']);
    // What a browser posts: the form's hidden fields and the ticked boxes.
    const body = new URLSearchParams(owner.form('redeem').fields);
    for (const id of boxes) body.append('revoke', id);
    const res = await fetch(`${stack.baseUrl}/oauth/authorize`, {
      method: 'POST',
      body,
      redirect: 'manual',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        cookie: [...owner.cookies].map(([k, v]) => `${k}=${v}`).join('; '),
      },
    });
    expect(res.status).toBe(303);
    for (const c of res.headers.getSetCookie())
      owner.cookies.set(c.slice(0, c.indexOf('=')), c.slice(c.indexOf('=') + 1, c.indexOf(';')));
    await owner.open(res.headers.get('location')!);
    expect(owner.html).toContain('Approve');
    // The stranger's consent-page session and password are gone.
    await stranger.open(url);
    expect(stranger.html).not.toContain('Approve');
    expect(stranger.html).not.toContain('Verify your email to continue');
    expect((await post('/api/auth/login', { email, password: 'stranger password' })).status).toBe(401);
  });

  it("from the API without keep, a sign-in link revokes every key and the squatter's password and sessions", async () => {
    const email = 'api-victim@example.com';
    const up = (await stack.api('POST', '/api/auth/signup', { body: { email, password: 'squatter password' } })).body;
    const key = (await stack.api('GET', '/api/keys', { token: up.token })).body.key;
    await stack.api('POST', '/api/auth/signin-link', { body: { email } });
    const token = tokenFromMail((await waitForMail(stack, email, /sign-in link/)).raw);
    const signed = await stack.api('POST', '/api/auth/signin', { body: { token } });
    expect(signed.status).toBe(200);
    for (const t of [up.token, key]) expect((await me(t)).status).toBe(401);
    expect((await post('/api/auth/login', { email, password: 'squatter password' })).status).toBe(401);
    expect((await me(signed.body.token)).body).toMatchObject({ email, emailVerified: true });
  });
});

describe("SPEC.md's provisioning flow is unchanged", () => {
  it('provision, confirm with POST /api/auth/verify, poll /v1/me with the same key until verified, then send', async () => {
    const email = 'spec-client@example.com';
    const prov = await stack.api('POST', '/api/v1/provision', { body: { email } });
    expect(prov.body).toMatchObject({ email, email_verified: false, is_new: true });
    const key: string = prov.body.api_key;
    expect((await me(key)).body).toMatchObject({ email, emailVerified: false });
    expect(await stack.api('POST', '/api/auth/verify', { body: { token: await verifyToken(email) } })).toMatchObject({
      status: 200,
      body: { ok: true, email, emailVerified: true },
    });
    await eventually(async () => (await me(key)).body.emailVerified === true);
    expect(
      (await stack.api('POST', '/api/domains/subdomain', { token: key, body: { subdomain: 'spec-client' } })).status,
    ).toBe(201);
    const sent = await stack.api('POST', '/v1/send', {
      token: key,
      body: { from: `hello@spec-client.${SERVICE}`, to: 'friend@example.net', subject: 'First', text: 'Hello' },
    });
    expect(sent).toMatchObject({ status: 200, body: { status: 'queued' } });
    // The key survived the confirmation: it is still the account's key.
    const keys = await stack.service.core.db
      .select({ id: schema.apiKeys.id })
      .from(schema.apiKeys)
      .where(and(eq(schema.apiKeys.userId, prov.body.user_id), inArray(schema.apiKeys.kind, ['account'])));
    expect(keys).toHaveLength(1);
    expect((await stack.api('GET', '/api/keys', { token: key })).body.key).toBe(key);
  });
});
