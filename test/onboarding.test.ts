import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schema } from '../db/index.js';
import { authorizeUrl, ConsentDriver, pkce, registerClient } from './helpers/oauth.js';
import { tokenFromMail, waitForMail } from './helpers/outbox.js';
import { eventually, startStack, type TestStack } from './helpers/stack.js';

/**
 * The official clients' onboarding (SPEC.md, Account lifecycle), walked over real HTTP as they run it:
 * provision, the owner opens the mailed link and confirms, the client polls GET /v1/me with the key
 * provisioning answered, then sends. And the protection that replaced the old credential reset: a link
 * opened by a mail scanner changes nothing, and the address's owner can disown an account someone else made.
 */
const SERVICE = 'onboard.svc.test';
let stack: TestStack;
beforeAll(async () => {
  stack = await startStack({ SERVICE_DOMAIN: SERVICE });
});
afterAll(async () => {
  await stack?.stop();
});

const me = (token: string) => stack.api('GET', '/v1/me', { token });
const verifyLink = async (email: string) => tokenFromMail((await waitForMail(stack, email, /Verify/)).raw);
/** A browser: opens the mailed page, keeps its cookies, posts its forms. */
const browser = () => new ConsentDriver(stack);

describe('provision → open the link → confirm → poll /v1/me with the same key → send', () => {
  it('the provisioned key keeps working through verification, and sending unblocks', async () => {
    const email = 'new-owner@example.com';
    const prov = await stack.api('POST', '/api/v1/provision', { body: { email, channel: 'cli' } });
    expect(prov).toMatchObject({ status: 200, body: { email, email_verified: false, is_new: true } });
    const key: string = prov.body.api_key;
    expect((await me(key)).body).toMatchObject({ email, emailVerified: false });
    // The client claims a hosted subdomain with the key; sending waits for the address.
    const claimed = await stack.api('POST', '/api/domains/subdomain', { token: key, body: { subdomain: 'new-owner' } });
    expect(claimed.status).toBe(201);
    const from = `hello@new-owner.${SERVICE}`;
    const send = () =>
      stack.api('POST', '/v1/send', {
        token: key,
        body: { from, to: 'friend@example.net', subject: 'First', text: 'Hello' },
      });
    expect(await send()).toMatchObject({ status: 403, body: { code: 'email_not_verified' } });

    // The owner opens the mailed link: a page that says how the account was made and what it holds.
    const token = await verifyLink(email);
    const b = browser();
    await b.open(`/auth/verify?token=${token}`);
    expect(b.status).toBe(200);
    expect(b.html).toContain('Is this account yours?');
    expect(b.html).toContain('POST /api/v1/provision');
    expect(b.html).toContain('<strong>cli</strong>');
    expect(b.html).toMatch(/from the client address <span class="host">[^<]*127\.0\.0\.1/);
    expect(b.html).toContain('The account API key');
    expect(b.html).toContain(`Domain new-owner.${SERVICE} (verified)`);
    expect((await me(key)).body.emailVerified).toBe(false); // opening the page changed nothing

    // Confirming (the page's own form, with its CSRF token and cookie) verifies the address.
    const confirmed = await b.request('POST', '/auth/verify', b.form('confirm').fields);
    expect(confirmed.status).toBe(200);
    expect(b.html).toContain('Your address is verified');

    // The client polls /v1/me with the same key and sees the address verified; the send goes out.
    await eventually(async () => (await me(key)).body.emailVerified === true);
    expect((await me(key)).body.sendingDomains).toContain(`new-owner.${SERVICE}`);
    const sent = await send();
    expect(sent).toMatchObject({ status: 200, body: { status: 'queued' } });
    await waitForMail(stack, 'friend@example.net', /^First$/);
  });

  it('a form that did not come from the page (no cookie, or a forged token) changes nothing', async () => {
    const email = 'csrf-check@example.com';
    const key = (await stack.api('POST', '/api/v1/provision', { body: { email } })).body.api_key;
    const token = await verifyLink(email);
    const b = browser();
    await b.open(`/auth/verify?token=${token}`);
    const fields = b.form('confirm').fields;
    const stranger = browser(); // another browser: no CSRF cookie of this page
    await stranger.request('POST', '/auth/verify', fields);
    expect(stranger.status).toBe(403);
    await b.request('POST', '/auth/verify', { ...fields, csrf: 'f'.repeat(64) });
    expect(b.status).toBe(403);
    expect((await me(key)).body.emailVerified).toBe(false);
    // The link is still good for its owner.
    await b.request('POST', '/auth/verify', fields);
    expect(b.status).toBe(200);
    expect((await me(key)).body.emailVerified).toBe(true);
  });
});

describe('mail scanners open links', () => {
  it('GETs of the verification link, its JSON twin and the sign-in and reset pages verify and sign in nobody', async () => {
    const email = 'scanned@example.com';
    const key = (await stack.api('POST', '/api/v1/provision', { body: { email } })).body.api_key;
    const token = await verifyLink(email);
    for (let i = 0; i < 3; i++) {
      expect((await fetch(`${stack.baseUrl}/auth/verify?token=${token}`)).status).toBe(200);
      // Links mailed before the page moved land on it too.
      const old = await fetch(`${stack.baseUrl}/api/auth/verify?token=${token}`, { redirect: 'manual' });
      expect(old.status).toBe(303);
      expect(old.headers.get('location')).toBe(`/auth/verify?token=${token}`);
      expect((await stack.api('GET', `/api/auth/link?token=${token}`)).body).toMatchObject({
        purpose: 'verify_email',
        email,
        emailVerified: false,
        origin: { via: 'provision' },
      });
    }
    expect((await me(key)).body.emailVerified).toBe(false);

    await stack.api('POST', '/api/auth/signin-link', { body: { email } });
    const signin = tokenFromMail((await waitForMail(stack, email, /sign-in link/)).raw);
    await stack.api('POST', '/api/auth/password/forgot', { body: { email } });
    const reset = tokenFromMail((await waitForMail(stack, email, /Reset/)).raw);
    const signinPage = await fetch(`${stack.baseUrl}/auth/signin?token=${signin}`).then((r) => r.text());
    expect(signinPage).toContain('This account is not verified yet');
    expect(signinPage).toContain('I did not ask for this');
    expect((await fetch(`${stack.baseUrl}/auth/reset?token=${reset}`)).status).toBe(200);
    expect((await me(key)).body.emailVerified).toBe(false);
    // Every token still works for the person who presses the button. (Confirmed first: on an address never
    // proven, a sign-in or reset link would revoke the provisioned key by default; see test/sign-in-abuse.test.ts.)
    expect((await stack.api('POST', '/api/auth/verify', { body: { token } })).status).toBe(200);
    expect((await stack.api('POST', '/api/auth/signin', { body: { token: signin } })).status).toBe(200);
    expect(
      (await stack.api('POST', '/api/auth/password/reset', { body: { token: reset, password: 'owner password 1' } }))
        .status,
    ).toBe(200);
    expect((await me(key)).status).toBe(200);
  });
});

describe('"I did not ask for this"', () => {
  it('the owner of the address sees what a stranger made and deletes it with everything it holds', async () => {
    const email = 'disowned@example.com';
    // A stranger signs up with the address and builds up credentials.
    const up = (await stack.api('POST', '/api/auth/signup', { body: { email, password: 'stranger password' } })).body;
    const key = (await stack.api('GET', '/api/keys', { token: up.token })).body.key;
    const domain = (
      await stack.api('POST', '/api/domains/subdomain', { token: up.token, body: { subdomain: 'stranger-box' } })
    ).body.domain;
    const scoped = (
      await stack.api('POST', '/api/keys/scoped', { token: up.token, body: { domainId: domain.id, name: 'ci' } })
    ).body.key;
    const apw = (
      await stack.api('POST', '/api/app-passwords', {
        token: up.token,
        body: { domain: domain.domain, protocols: ['imap', 'api'], label: 'phone' },
      })
    ).body.secret;
    expect(
      (
        await stack.api('POST', '/api/routes', {
          token: up.token,
          body: { domainId: domain.id, address: '*', action: 'forward', destination: 'stranger@elsewhere.example' },
        })
      ).status,
    ).toBe(201);
    for (const t of [up.token, key, scoped]) expect((await me(t)).status).toBe(200);

    // The owner opens the link mailed to the address: the page lists all of it.
    const token = await verifyLink(email);
    const b = browser();
    await b.open(`/auth/verify?token=${token}`);
    expect(b.html).toContain('was created by signing up with a password');
    for (const text of [
      'The account API key',
      'A password',
      'Domain-scoped key “ci” for stranger-box',
      'App password “phone”',
      'forward to <span class="host">stranger@elsewhere.example</span>',
      'Domain stranger-box',
    ]) {
      expect(b.html).toContain(text);
    }
    const res = await b.request('POST', '/auth/verify', b.form('disown').fields);
    expect(res.status).toBe(200);
    expect(b.html).toContain('The account is deleted');

    // Every credential is dead, and nothing of the account is left in any table.
    for (const t of [up.token, key, scoped]) expect((await me(t)).status).toBe(401);
    expect((await stack.api('GET', '/api/mailbox/messages', { token: apw })).status).toBe(401);
    expect(
      (await stack.api('POST', '/api/auth/login', { body: { email, password: 'stranger password' } })).status,
    ).toBe(401);
    expect(await rowsLeftOf(up.user.id)).toEqual([]);
    expect((await stack.api('GET', `/api/domains/subdomain/check?name=stranger-box`, { token: key })).status).toBe(401);
    // The address is free: its owner can make an account of their own.
    expect((await stack.api('POST', '/api/v1/provision', { body: { email } })).status).toBe(200);
  });

  it('a script disowns with the token; a verified account cannot be disowned and keeps its link', async () => {
    const email = 'script-disown@example.com';
    await stack.api('POST', '/api/v1/provision', { body: { email } });
    const first = await verifyLink(email);
    expect(await stack.api('POST', '/api/auth/disown', { body: { token: first } })).toMatchObject({
      status: 200,
      body: { ok: true, email, deleted: true },
    });
    expect((await stack.api('POST', '/api/auth/disown', { body: { token: first } })).status).toBe(401);

    const email2 = 'kept@example.com';
    const key = (await stack.api('POST', '/api/v1/provision', { body: { email: email2 } })).body.api_key;
    await stack.api('POST', '/api/auth/verify', { body: { token: await verifyLink(email2) } });
    await stack.api('POST', '/api/auth/signin-link', { body: { email: email2 } });
    const signin = tokenFromMail((await waitForMail(stack, email2, /sign-in link/)).raw);
    expect(await stack.api('POST', '/api/auth/disown', { body: { token: signin } })).toMatchObject({
      status: 409,
      body: { code: 'already_verified' },
    });
    expect((await me(key)).status).toBe(200);
    expect((await stack.api('POST', '/api/auth/signin', { body: { token: signin } })).status).toBe(200);
  });
});

describe("an account made on an app's consent page", () => {
  it('the mailed link back to the consent page names the app, and "I did not ask for this" deletes the account there', async () => {
    const email = 'consent-made@example.com';
    const client = await registerClient(stack, ['http://127.0.0.1:9/cb'], 'Shady Linker');
    const url = authorizeUrl(stack, {
      clientId: client.client_id,
      redirectUri: 'http://127.0.0.1:9/cb',
      challenge: pkce().challenge,
      state: 's',
    });
    const stranger = browser();
    await stranger.open(url);
    await stranger.submit('signup', { email, password: 'stranger password' });
    expect(stranger.html).toContain('Verify your email to continue');

    // The owner opens the mailed link (it leads back to the same consent request).
    const token = await verifyLink(email);
    const owner = browser();
    await owner.open(`${url}&login_token=${token}`);
    expect(owner.html).toContain('<strong>Shady Linker</strong> asks to link to an account');
    expect(owner.html).toContain('A password');
    expect((await stack.api('GET', `/api/auth/link?token=${token}`)).body.origin).toMatchObject({
      via: 'consent',
      app: { clientId: client.client_id, name: 'Shady Linker' },
    });
    await owner.submit('disown');
    expect(owner.html).toContain(`The account for ${email} and everything it held are deleted.`);
    expect(
      (await stack.api('POST', '/api/auth/login', { body: { email, password: 'stranger password' } })).status,
    ).toBe(401);
    // The stranger's consent-page session ended with the account: Approve is not offered.
    await stranger.open(url);
    expect(stranger.html).not.toContain('Approve');
  });
});

/**
 * Every table with a user_id column that still has a row of the account. The removal reads the same catalog,
 * so this cannot see a table without that column: test/account-removal.test.ts counts every table instead.
 */
async function rowsLeftOf(userId: string): Promise<string[]> {
  const { db } = stack.service.core;
  const rows = (res: unknown) => (res as { rows?: unknown[] }).rows ?? (res as unknown[]);
  const tables = rows(
    await db.execute(
      sql`select table_name from information_schema.columns where table_schema = current_schema() and column_name = 'user_id'`,
    ),
  ) as { table_name: string }[];
  const left: string[] = [];
  for (const { table_name } of tables) {
    const n = rows(
      await db.execute(sql`select count(*)::int as n from ${sql.identifier(table_name)} where user_id = ${userId}`),
    ) as { n: number }[];
    if (n[0]!.n > 0) left.push(table_name);
  }
  const [user] = await db
    .select()
    .from(schema.users)
    .where(sql`${schema.users.id} = ${userId}`);
  if (user) left.push('users');
  return left;
}
