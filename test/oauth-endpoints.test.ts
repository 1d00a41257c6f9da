import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { operations } from '../api/ops/index.js';
import { schema } from '../db/index.js';
import {
  approveOverHttp,
  authorizeUrl,
  ConsentDriver,
  pkce,
  registerClient,
  startOAuthStack,
  tokenRequest,
  verifiedAccount,
} from './helpers/oauth.js';
import { eventually, type TestStack } from './helpers/stack.js';

let stack: TestStack;
let account: { email: string; password: string };
const REDIRECT = 'http://127.0.0.1:9/callback';
beforeAll(async () => {
  stack = await startOAuthStack();
  account = await verifiedAccount(stack, 'linker@example.com');
});
afterAll(async () => {
  await stack?.stop();
});

/** A registered client, an approved code for it, and the verifier that goes with the code. */
async function approvedCode(state = 'st-1') {
  const client = await registerClient(stack, [REDIRECT]);
  const { verifier, challenge } = pkce();
  const back = await approveOverHttp(
    stack,
    authorizeUrl(stack, { clientId: client.client_id, redirectUri: REDIRECT, challenge, state }),
    account,
  );
  return { clientId: client.client_id, verifier, code: back.searchParams.get('code')!, back };
}
const exchange = (c: { clientId: string; verifier: string; code: string }, over: Record<string, string> = {}) =>
  tokenRequest(stack, {
    grant_type: 'authorization_code',
    code: c.code,
    redirect_uri: REDIRECT,
    client_id: c.clientId,
    code_verifier: c.verifier,
    ...over,
  });

describe('discovery', () => {
  it('serves every SPEC.md field at the RFC 8414 path and the OpenID path', async () => {
    const a = await stack.api('GET', '/.well-known/oauth-authorization-server');
    const b = await stack.api('GET', '/.well-known/openid-configuration');
    const base = stack.config.publicUrl;
    expect(a.status).toBe(200);
    expect(b.body).toEqual(a.body);
    expect(a.body).toMatchObject({
      issuer: base,
      authorization_endpoint: `${base}/oauth/authorize`,
      token_endpoint: `${base}/oauth/token`,
      registration_endpoint: `${base}/oauth/register`,
      revocation_endpoint: `${base}/oauth/revoke`,
      scopes_supported: ['account'],
      response_types_supported: ['code'],
      grant_types_supported: ['authorization_code', 'refresh_token'],
      code_challenge_methods_supported: ['S256'],
      token_endpoint_auth_methods_supported: ['none'],
    });
  });
});

describe('registration', () => {
  it('registers a public client and echoes its metadata, issued-at in Unix seconds', async () => {
    const res = await stack.api('POST', '/oauth/register', {
      body: {
        client_name: 'Echo App',
        redirect_uris: [
          'https://app.example.com/cb',
          'http://localhost:8080/cb',
          'http://127.0.0.7/cb',
          'http://[::1]:3000/cb',
        ],
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
        token_endpoint_auth_method: 'none',
      },
    });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      client_id: expect.stringMatching(/^oac_/),
      client_id_issued_at: expect.any(Number),
      client_name: 'Echo App',
      redirect_uris: [
        'https://app.example.com/cb',
        'http://localhost:8080/cb',
        'http://127.0.0.7/cb',
        'http://[::1]:3000/cb',
      ],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    });
    expect(Math.abs(res.body.client_id_issued_at - Date.now() / 1000)).toBeLessThan(60);
  });

  it.each([
    ['javascript:', 'javascript:alert(1)', 'invalid_redirect_uri'],
    ['data:', 'data:text/html,hi', 'invalid_redirect_uri'],
    ['a fragment', 'https://app.example.com/cb#frag', 'invalid_redirect_uri'],
    ['http off loopback', 'http://app.example.com/cb', 'invalid_redirect_uri'],
    ['a relative URI', '/cb', 'invalid_redirect_uri'],
    ['a custom scheme', 'com.example.app:/cb', 'invalid_redirect_uri'],
  ])('rejects %s with an RFC 7591 error body', async (_what, uri, error) => {
    const res = await stack.api('POST', '/oauth/register', { body: { redirect_uris: [uri] } });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ error, error_description: expect.any(String) });
  });

  it('rejects metadata it cannot honour with invalid_client_metadata', async () => {
    for (const body of [
      { redirect_uris: [REDIRECT], grant_types: ['client_credentials'] },
      { redirect_uris: [REDIRECT], response_types: ['token'] },
      { redirect_uris: [REDIRECT], token_endpoint_auth_method: 'client_secret_basic' },
    ]) {
      const res = await stack.api('POST', '/oauth/register', { body });
      expect(res.body.error, JSON.stringify(body)).toBe('invalid_client_metadata');
    }
    expect((await stack.api('POST', '/oauth/register', { body: {} })).body.error).toBe('invalid_redirect_uri');
  });
});

describe('the authorization request', () => {
  it('shows an unregistered or altered redirect URI on the page and never redirects to it', async () => {
    const client = await registerClient(stack, [REDIRECT]);
    const { challenge } = pkce();
    for (const uri of [
      'http://127.0.0.1:9/other',
      `${REDIRECT}?x=1`,
      'http://127.0.0.1:9/callback/',
      'https://evil.example/callback',
    ]) {
      const res = await fetch(
        authorizeUrl(stack, { clientId: client.client_id, redirectUri: uri, challenge, state: 's' }),
        { redirect: 'manual' },
      );
      expect(res.status, uri).toBe(400);
      expect(res.headers.get('location')).toBeNull();
      expect(await res.text()).toContain('does not match');
    }
    const unknown = await fetch(
      authorizeUrl(stack, { clientId: 'oac_nope00000000000000000000', redirectUri: REDIRECT, challenge }),
      { redirect: 'manual' },
    );
    expect(unknown.status).toBe(400);
  });

  it.each([
    ['a plain challenge', { code_challenge_method: 'plain' }],
    ['a missing challenge', { code_challenge: '' }],
    ['no challenge method', { code_challenge_method: '' }],
  ])('redirects %s back as invalid_request with the state', async (_what, extra) => {
    const client = await registerClient(stack, [REDIRECT]);
    const url = authorizeUrl(stack, {
      clientId: client.client_id,
      redirectUri: REDIRECT,
      challenge: pkce().challenge,
      state: 'keep-me',
      extra,
    });
    const res = await fetch(url, { redirect: 'manual' });
    expect(res.status).toBe(303);
    const back = new URL(res.headers.get('location')!);
    expect(`${back.origin}${back.pathname}`).toBe(REDIRECT);
    expect(Object.fromEntries(back.searchParams)).toMatchObject({
      error: 'invalid_request',
      state: 'keep-me',
      iss: stack.config.publicUrl,
    });
  });

  it('returns access_denied with the state when the user denies', async () => {
    const client = await registerClient(stack, [REDIRECT]);
    const d = new ConsentDriver(stack);
    await d.open(
      authorizeUrl(stack, {
        clientId: client.client_id,
        redirectUri: REDIRECT,
        challenge: pkce().challenge,
        state: 'deny-state',
      }),
    );
    await d.submit('login', account);
    expect(d.html).toContain('Approve');
    const res = await d.submit('deny');
    const back = new URL(res.headers.get('location')!);
    expect(Object.fromEntries(back.searchParams)).toMatchObject({ error: 'access_denied', state: 'deny-state' });
    expect(back.searchParams.has('code')).toBe(false);
  });

  it('refuses a forged consent form (no or wrong CSRF token, or a token for another request) and issues no code', async () => {
    const client = await registerClient(stack, [REDIRECT]);
    const d = new ConsentDriver(stack);
    const { challenge } = pkce();
    await d.open(authorizeUrl(stack, { clientId: client.client_id, redirectUri: REDIRECT, challenge, state: 'csrf' }));
    await d.submit('login', account);
    const approve = d.form('approve').fields;
    const before = (await stack.service.core.db.select().from(schema.oauthCodes)).length;
    const { csrf: _drop, ...noToken } = approve;
    for (const fields of [
      noToken,
      { ...approve, csrf: '0'.repeat(64) },
      { ...approve, state: 'swapped' },
      { ...approve, code_challenge: pkce().challenge },
    ]) {
      const res = await d.request('POST', '/oauth/authorize', fields);
      expect(res.status).toBe(403);
      expect(res.headers.get('location')).toBeNull();
    }
    // The same form from a browser without this browser's CSRF cookie (another site posting it).
    const other = new ConsentDriver(stack);
    other.cookies.set('svc_oauth_session', d.cookies.get('svc_oauth_session')!);
    expect((await other.request('POST', '/oauth/authorize', approve)).status).toBe(403);
    expect((await stack.service.core.db.select().from(schema.oauthCodes)).length).toBe(before);
    // The genuine form still works.
    expect((await d.request('POST', '/oauth/authorize', approve)).status).toBe(303);
  });
});

describe('the token endpoint', () => {
  it('issues tokens for a code with the right verifier; they work on management routes', async () => {
    const c = await approvedCode('st-ok');
    expect(c.back.searchParams.get('state')).toBe('st-ok');
    const t = await exchange(c);
    expect(t.status).toBe(200);
    expect(t.headers.get('cache-control')).toBe('no-store');
    expect(t.body).toEqual({
      access_token: expect.any(String),
      token_type: 'Bearer',
      expires_in: 900,
      refresh_token: expect.any(String),
      scope: 'account',
    });
    const keys = await stack.api('GET', '/api/keys', { token: t.body.access_token });
    expect(keys.status).toBe(200);
    expect(keys.body.key).toMatch(/^svc_live_/);
    expect((await stack.api('GET', '/api/domains', { token: t.body.access_token })).status).toBe(200);
    expect((await stack.api('GET', '/v1/me', { token: t.body.access_token })).body.email).toBe(account.email);
  });

  it('accepts a JSON body too', async () => {
    const c = await approvedCode();
    const res = await stack.api('POST', '/oauth/token', {
      body: {
        grant_type: 'authorization_code',
        code: c.code,
        redirect_uri: REDIRECT,
        client_id: c.clientId,
        code_verifier: c.verifier,
      },
    });
    expect(res.status).toBe(200);
    expect(res.body.token_type).toBe('Bearer');
  });

  it('rejects a missing verifier (invalid_request) and a wrong one (invalid_grant)', async () => {
    const c = await approvedCode();
    const missing = await tokenRequest(stack, {
      grant_type: 'authorization_code',
      code: c.code,
      redirect_uri: REDIRECT,
      client_id: c.clientId,
    });
    expect(missing).toMatchObject({
      status: 400,
      body: { error: 'invalid_request', error_description: expect.stringContaining('code_verifier') },
    });
    const wrong = await exchange(c, { code_verifier: pkce().verifier });
    expect(wrong).toMatchObject({ status: 400, body: { error: 'invalid_grant' } });
    // A wrong guess burns the code: the right verifier no longer helps.
    expect((await exchange(c)).body.error).toBe('invalid_grant');
  });

  it('rejects a code sent with another redirect URI or client', async () => {
    const c = await approvedCode();
    expect((await exchange(c, { redirect_uri: 'http://127.0.0.1:9/other' })).body.error).toBe('invalid_grant');
    const d = await approvedCode();
    const other = await registerClient(stack, [REDIRECT]);
    expect((await exchange(d, { client_id: other.client_id })).body.error).toBe('invalid_grant');
  });

  it('answers a replayed code invalid_grant and revokes the tokens it issued', async () => {
    const c = await approvedCode();
    const first = await exchange(c);
    expect((await stack.api('GET', '/api/keys', { token: first.body.access_token })).status).toBe(200);
    const replay = await exchange(c);
    expect(replay).toMatchObject({ status: 400, body: { error: 'invalid_grant' } });
    expect((await stack.api('GET', '/api/keys', { token: first.body.access_token })).body).toMatchObject({
      code: 'token_revoked',
    });
    expect(
      (await tokenRequest(stack, { grant_type: 'refresh_token', refresh_token: first.body.refresh_token })).body.error,
    ).toBe('invalid_grant');
  });

  it('rotates refresh tokens; a reused one revokes the whole family', async () => {
    const c = await approvedCode();
    const t1 = (await exchange(c)).body;
    const t2 = await tokenRequest(stack, {
      grant_type: 'refresh_token',
      refresh_token: t1.refresh_token,
      client_id: c.clientId,
    });
    expect(t2.status).toBe(200);
    expect(t2.body.refresh_token).not.toBe(t1.refresh_token);
    expect((await stack.api('GET', '/api/keys', { token: t2.body.access_token })).status).toBe(200);
    const reuse = await tokenRequest(stack, { grant_type: 'refresh_token', refresh_token: t1.refresh_token });
    expect(reuse).toMatchObject({ status: 400, body: { error: 'invalid_grant' } });
    expect((await stack.api('GET', '/api/keys', { token: t2.body.access_token })).status).toBe(401);
    expect(
      (await tokenRequest(stack, { grant_type: 'refresh_token', refresh_token: t2.body.refresh_token })).body.error,
    ).toBe('invalid_grant');
  });

  it('stores codes and refresh tokens hashed, never in clear', async () => {
    const c = await approvedCode();
    const t = (await exchange(c)).body;
    const dump = JSON.stringify([
      await stack.service.core.db.select().from(schema.oauthCodes),
      await stack.service.core.db.select().from(schema.oauthRefreshTokens),
    ]);
    expect(dump).not.toContain(c.code);
    expect(dump).not.toContain(t.refresh_token);
  });

  it('answers unknown grant types and malformed bodies in the RFC 6749 shape', async () => {
    expect((await tokenRequest(stack, { grant_type: 'password' })).body.error).toBe('unsupported_grant_type');
    const bad = await stack.api('POST', '/oauth/token', { raw: '{"grant_type":' });
    expect(bad).toMatchObject({ status: 400, body: { error: 'invalid_request' } });
  });
});

describe('who may approve', () => {
  it('an account whose email is not verified cannot approve, even by posting the form', async () => {
    const email = 'unverified-linker@example.com';
    await stack.api('POST', '/api/auth/signup', { body: { email, password: 'unverified pw 1' } });
    const client = await registerClient(stack, [REDIRECT]);
    const d = new ConsentDriver(stack);
    await d.open(
      authorizeUrl(stack, { clientId: client.client_id, redirectUri: REDIRECT, challenge: pkce().challenge }),
    );
    await d.submit('login', { email, password: 'unverified pw 1' });
    expect(d.html).toContain('Verify your email to continue');
    const fields = { ...d.form('deny').fields, action: 'approve' };
    const res = await d.request('POST', '/oauth/authorize', fields);
    expect(res.status).toBe(403);
    expect(res.headers.get('location')).toBeNull();
  });

  it("the consent page's browser session ends with the account's sessions: after a sign-out or a password change it offers no Approve and issues no code", async () => {
    const owner = await verifiedAccount(stack, 'consent-session@example.com', 'consent password 1');
    const client = await registerClient(stack, [REDIRECT]);
    const url = authorizeUrl(stack, {
      clientId: client.client_id,
      redirectUri: REDIRECT,
      challenge: pkce().challenge,
      state: 'sv',
    });
    const codes = async () => (await stack.service.core.db.select().from(schema.oauthCodes)).length;
    const signIn = async () => (await stack.api('POST', '/api/auth/login', { body: owner })).body.token as string;
    for (const end of [
      async () => expect((await stack.api('POST', '/api/auth/signout', { token: await signIn() })).status).toBe(200),
      async () => {
        const changed = await stack.api('POST', '/api/auth/password', {
          token: await signIn(),
          body: { currentPassword: owner.password, password: 'consent password 2' },
        });
        expect(changed.status).toBe(200);
        owner.password = 'consent password 2';
      },
    ]) {
      const d = new ConsentDriver(stack);
      await d.open(url);
      await d.submit('login', owner);
      const approve = d.form('approve').fields;
      await end();
      // The same browser, its cookie unchanged: signed out, so the page asks to sign in again.
      await d.open(url);
      expect(d.html).not.toContain('Approve');
      const before = await codes();
      const res = await d.request('POST', '/oauth/authorize', approve);
      expect(res.status).toBe(401);
      expect(res.headers.get('location')).toBeNull();
      expect(await codes()).toBe(before);
    }
  });

  it("signing out on the consent page ends the account's other sessions too (as the dashboard's sign-out does)", async () => {
    const owner = await verifiedAccount(stack, 'consent-logout@example.com', 'consent password 3');
    const token = (await stack.api('POST', '/api/auth/login', { body: owner })).body.token as string;
    const client = await registerClient(stack, [REDIRECT]);
    const d = new ConsentDriver(stack);
    await d.open(
      authorizeUrl(stack, { clientId: client.client_id, redirectUri: REDIRECT, challenge: pkce().challenge }),
    );
    await d.submit('login', owner);
    expect((await stack.api('GET', '/v1/me', { token })).status).toBe(200);
    await d.submit('logout');
    expect(d.html).not.toContain('Approve');
    expect((await stack.api('GET', '/v1/me', { token })).body.code).toBe('session_revoked');
  });

  it('OAuth access tokens are accepted by every management operation that takes a session', () => {
    // The account's own sign-in credentials (auth.*: the password) stay with the person, never a linked app.
    for (const op of operations) {
      if (op.auth !== 'public' && op.auth.includes('session') && !op.name.startsWith('auth.'))
        expect(op.auth, op.name).toContain('oauth');
    }
  });
});

describe('revocation and linked apps', () => {
  it('RFC 7009 revocation of a refresh token stops the access token at once', async () => {
    const c = await approvedCode();
    const t = (await exchange(c)).body;
    const res = await fetch(`${stack.baseUrl}/oauth/revoke`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: `token=${t.refresh_token}&client_id=${c.clientId}`,
    });
    expect(res.status).toBe(200);
    expect((await stack.api('GET', '/api/keys', { token: t.access_token })).status).toBe(401);
    expect((await stack.api('POST', '/oauth/revoke', { body: { token: 'not-a-token' } })).status).toBe(200);
  });

  it('lists linked apps and unlinks one: its tokens stop at once', async () => {
    const c = await approvedCode();
    const t = (await exchange(c)).body;
    const session = (await stack.api('POST', '/api/auth/login', { body: account })).body.token;
    const list = await stack.api('GET', '/api/oauth/grants', { token: t.access_token });
    const mine = list.body.find((g: any) => g.client_id === c.clientId);
    expect(mine).toMatchObject({
      id: expect.stringMatching(/^grt_/),
      client_name: 'Test App',
      redirect_hosts: ['127.0.0.1:9'],
      scope: 'account',
    });
    expect((await stack.api('DELETE', `/api/oauth/grants/${mine.id}`, { token: session })).body).toEqual({ ok: true });
    expect((await stack.api('GET', '/api/keys', { token: t.access_token })).body.code).toBe('token_revoked');
    expect((await stack.api('GET', '/api/oauth/grants', { token: session })).body.map((g: any) => g.id)).not.toContain(
      mine.id,
    );
    expect((await stack.api('DELETE', `/api/oauth/grants/${mine.id}`, { token: session })).status).toBe(404);
    const [row] = await stack.service.core.db
      .select()
      .from(schema.oauthGrants)
      .where(eq(schema.oauthGrants.id, mine.id));
    expect(row!.revokedReason).toBe('user');
  });
});

describe('access token lifetime', () => {
  it('an expired access token is refused; a refresh gets a fresh one', async () => {
    const short = await startOAuthStack({ OAUTH_ACCESS_TOKEN_TTL: '1' }, ['api']);
    try {
      const acct = await verifiedAccount(short, 'expiry@example.com');
      const client = await registerClient(short, [REDIRECT]);
      const { verifier, challenge } = pkce();
      const back = await approveOverHttp(
        short,
        authorizeUrl(short, { clientId: client.client_id, redirectUri: REDIRECT, challenge }),
        acct,
      );
      const t = await tokenRequest(short, {
        grant_type: 'authorization_code',
        code: back.searchParams.get('code')!,
        redirect_uri: REDIRECT,
        client_id: client.client_id,
        code_verifier: verifier,
      });
      expect(t.body.expires_in).toBe(1);
      const expired = await eventually(async () => {
        const r = await short.api('GET', '/api/keys', { token: t.body.access_token });
        return r.status === 401 ? r : undefined;
      }, 5000);
      expect(expired.body.code).toBe('token_expired');
      const fresh = await tokenRequest(short, { grant_type: 'refresh_token', refresh_token: t.body.refresh_token });
      expect((await short.api('GET', '/api/keys', { token: fresh.body.access_token })).status).toBe(200);
    } finally {
      await short.stop();
    }
  });
});
