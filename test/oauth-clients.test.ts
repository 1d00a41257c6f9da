import * as oauth from 'oauth4webapi';
import * as client from 'openid-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { approveOverHttp, startOAuthStack, verifiedAccount } from './helpers/oauth.js';
import type { TestStack } from './helpers/stack.js';

/** Strict, certified client libraries complete the whole flow against the server with no special cases. */
let stack: TestStack;
let account: { email: string; password: string };
const REDIRECT = 'http://127.0.0.1:9/strict/cb';
beforeAll(async () => {
  stack = await startOAuthStack();
  account = await verifiedAccount(stack, 'strict@example.com');
});
afterAll(async () => {
  await stack?.stop();
});

describe('oauth4webapi', () => {
  it('discovers (RFC 8414), registers, authorizes with PKCE, rotates the refresh token and revokes', async () => {
    const issuer = new URL(stack.config.publicUrl);
    const insecure = { [oauth.allowInsecureRequests]: true };
    const as = await oauth.processDiscoveryResponse(
      issuer,
      await oauth.discoveryRequest(issuer, { algorithm: 'oauth2', ...insecure }),
    );
    const registered = await oauth.processDynamicClientRegistrationResponse(
      await oauth.dynamicClientRegistrationRequest(
        as,
        {
          client_name: 'oauth4webapi',
          redirect_uris: [REDIRECT],
          token_endpoint_auth_method: 'none',
        },
        insecure,
      ),
    );
    const c: oauth.Client = { client_id: registered.client_id, token_endpoint_auth_method: 'none' };

    const verifier = oauth.generateRandomCodeVerifier();
    const state = oauth.generateRandomState();
    const url = new URL(as.authorization_endpoint!);
    url.search = new URLSearchParams({
      client_id: c.client_id,
      redirect_uri: REDIRECT,
      response_type: 'code',
      scope: 'mcp',
      state,
      code_challenge: await oauth.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
    }).toString();
    const back = await approveOverHttp(stack, url.toString(), account);
    const params = oauth.validateAuthResponse(as, c, back, state);

    const tokens = await oauth.processAuthorizationCodeResponse(
      as,
      c,
      await oauth.authorizationCodeGrantRequest(as, c, oauth.None(), params, REDIRECT, verifier, insecure),
    );
    expect(tokens).toMatchObject({ token_type: 'bearer', scope: 'account', expires_in: 900 });
    const keys = await oauth.protectedResourceRequest(
      tokens.access_token,
      'GET',
      new URL('/api/keys', issuer),
      undefined,
      undefined,
      insecure,
    );
    expect(keys.status).toBe(200);
    expect((await keys.json()).key).toMatch(/^svc_live_/);

    const rotated = await oauth.processRefreshTokenResponse(
      as,
      c,
      await oauth.refreshTokenGrantRequest(as, c, oauth.None(), tokens.refresh_token!, insecure),
    );
    expect(rotated.refresh_token).not.toBe(tokens.refresh_token);
    // The used refresh token is refused, as an RFC 6749 error the library reports.
    const reuse = oauth.processRefreshTokenResponse(
      as,
      c,
      await oauth.refreshTokenGrantRequest(as, c, oauth.None(), tokens.refresh_token!, insecure),
    );
    await expect(reuse).rejects.toMatchObject({ error: 'invalid_grant' });

    const again = await freshTokens(as, c, insecure);
    await oauth.processRevocationResponse(
      await oauth.revocationRequest(as, c, oauth.None(), again.refresh_token!, insecure),
    );
    expect(
      (
        await oauth.protectedResourceRequest(
          again.access_token,
          'GET',
          new URL('/api/keys', issuer),
          undefined,
          undefined,
          insecure,
        )
      ).status,
    ).toBe(401);
  });
});

/** A second authorization of the same oauth4webapi client, for a fresh grant. */
async function freshTokens(as: oauth.AuthorizationServer, c: oauth.Client, insecure: object) {
  const verifier = oauth.generateRandomCodeVerifier();
  const url = new URL(as.authorization_endpoint!);
  url.search = new URLSearchParams({
    client_id: c.client_id,
    redirect_uri: REDIRECT,
    response_type: 'code',
    code_challenge: await oauth.calculatePKCECodeChallenge(verifier),
    code_challenge_method: 'S256',
  }).toString();
  const params = oauth.validateAuthResponse(
    as,
    c,
    await approveOverHttp(stack, url.toString(), account),
    oauth.expectNoState,
  );
  return oauth.processAuthorizationCodeResponse(
    as,
    c,
    await oauth.authorizationCodeGrantRequest(as, c, oauth.None(), params, REDIRECT, verifier, insecure),
  );
}

describe('openid-client', () => {
  it('discovers (OpenID path), registers, authorizes with PKCE, refreshes, revokes', async () => {
    const issuer = new URL(stack.config.publicUrl);
    const execute = [client.allowInsecureRequests];
    const registeredConfig = await client.dynamicClientRegistration(
      issuer,
      { client_name: 'openid-client', redirect_uris: [REDIRECT], token_endpoint_auth_method: 'none' },
      client.None(),
      { execute },
    );
    const clientId = registeredConfig.clientMetadata().client_id;
    const config = await client.discovery(
      issuer,
      clientId,
      { redirect_uris: [REDIRECT], token_endpoint_auth_method: 'none' },
      client.None(),
      { execute },
    );
    expect(config.serverMetadata().code_challenge_methods_supported).toEqual(['S256']);

    const verifier = client.randomPKCECodeVerifier();
    const state = client.randomState();
    const url = client.buildAuthorizationUrl(config, {
      redirect_uri: REDIRECT,
      scope: 'account',
      state,
      code_challenge: await client.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
    });
    const back = await approveOverHttp(stack, url.toString(), account);
    const tokens = await client.authorizationCodeGrant(config, back, {
      pkceCodeVerifier: verifier,
      expectedState: state,
    });
    expect(tokens.expiresIn()).toBeGreaterThan(0);
    const keys = await client.fetchProtectedResource(config, tokens.access_token, new URL('/api/keys', issuer), 'GET');
    expect(keys.status).toBe(200);

    const next = await client.refreshTokenGrant(config, tokens.refresh_token!);
    expect(next.refresh_token).not.toBe(tokens.refresh_token);
    expect(
      (await client.fetchProtectedResource(config, next.access_token, new URL('/api/oauth/grants', issuer), 'GET'))
        .status,
    ).toBe(200);

    await client.tokenRevocation(config, next.access_token);
    expect(
      (await fetch(new URL('/api/keys', issuer), { headers: { authorization: `Bearer ${next.access_token}` } })).status,
    ).toBe(401);
    await expect(client.refreshTokenGrant(config, next.refresh_token!)).rejects.toMatchObject({
      error: 'invalid_grant',
    });
  });
});
