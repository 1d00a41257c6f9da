import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  approveOverHttp,
  authorizeUrl,
  pkce,
  registerClient,
  startOAuthStack,
  tokenRequest,
  verifiedAccount,
} from './helpers/oauth.js';
import type { TestStack } from './helpers/stack.js';

/** /mcp at the edge (issue 29): the REST body limits, the Origin check, and tokens bound to /mcp (RFC 8707). */
let stack: TestStack;
let publicUrl: string;
let key: string;
const REDIRECT = 'http://127.0.0.1:9/mcp-edge/cb';

beforeAll(async () => {
  stack = await startOAuthStack({}, ['api']);
  publicUrl = stack.config.publicUrl;
  const session = (
    await stack.api('POST', '/api/auth/signup', {
      body: { email: 'mcp-edge-key@example.com', password: 'mcp edge password' },
    })
  ).body.token as string;
  key = (await stack.api('GET', '/api/keys', { token: session })).body.key;
}, 60_000);
afterAll(async () => stack?.stop());

const message = (id: number, method: string, params: Record<string, unknown>) => ({
  jsonrpc: '2.0',
  id,
  method,
  params,
});
const initialize = (extra: Record<string, unknown> = {}) =>
  message(1, 'initialize', {
    protocolVersion: '2025-11-25',
    capabilities: {},
    clientInfo: { name: 'edge', version: '1' },
    ...extra,
  });
const postMcp = (credential: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${publicUrl}/mcp`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${credential}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...headers,
    },
    body: JSON.stringify(body),
  });

/** An access token of a linked app, from the code flow over HTTP, asked for `resource` (none: the default). */
async function accessToken(resource?: string) {
  const account = await verifiedAccount(stack, `mcp-edge-${Math.random().toString(36).slice(2, 8)}@example.com`);
  const { client_id: clientId } = await registerClient(stack, [REDIRECT], 'Edge agent');
  const { verifier, challenge } = pkce();
  const back = await approveOverHttp(
    stack,
    authorizeUrl(stack, { clientId, redirectUri: REDIRECT, challenge }),
    account,
  );
  const res = await tokenRequest(stack, {
    grant_type: 'authorization_code',
    code: back.searchParams.get('code')!,
    redirect_uri: REDIRECT,
    client_id: clientId,
    code_verifier: verifier,
    ...(resource ? { resource } : {}),
  });
  return { ...res, clientId };
}

describe('/mcp body limits', () => {
  it('refuses a body over the REST limit of the call it makes (100 KB for initialize and tools/list) with 413', async () => {
    const padded = await postMcp(key, initialize({ padding: 'x'.repeat(200 * 1024) }));
    expect(padded.status).toBe(413);
    expect((await padded.json()).code).toBe('payload_too_large');
    const small = await postMcp(key, initialize());
    expect(small.status).toBe(200);
  });

  it('takes the send limit for a send call, as POST /v1/send does', async () => {
    const args = { from: 'a@example.com', to: 'b@example.com', subject: 'big', text: 'y'.repeat(200 * 1024) };
    const res = await postMcp(key, message(2, 'tools/call', { name: 'send', arguments: args }));
    expect(res.status).toBe(200); // answered by the tool (refused there: no verified domain), not by the body limit
  });
});

describe('/mcp origins', () => {
  it('refuses a browser page of a foreign origin with 403; its own origin and no Origin (not a browser) are fine', async () => {
    const foreign = await postMcp(key, initialize(), { origin: 'https://evil.example' });
    expect(foreign.status).toBe(403);
    expect((await foreign.json()).code).toBe('forbidden_origin');
    expect((await postMcp(key, initialize(), { origin: 'null' })).status).toBe(403);
    expect((await postMcp(key, initialize(), { origin: publicUrl })).status).toBe(200);
    expect((await postMcp(key, initialize())).status).toBe(200);
  });
});

describe('/mcp token audience (RFC 8707)', () => {
  it('a token asked for /mcp, or for nothing in particular, works there', async () => {
    for (const resource of [`${publicUrl}/mcp`, undefined]) {
      const t = await accessToken(resource);
      expect(t.status).toBe(200);
      expect((await postMcp(t.body.access_token, initialize())).status).toBe(200);
    }
  });

  it('a token minted for another resource is refused 401 with the resource metadata challenge; its refresh for /mcp works', async () => {
    const t = await accessToken(publicUrl); // the REST API, not /mcp
    expect(t.status).toBe(200);
    expect((await stack.api('GET', '/api/oauth/grants', { token: t.body.access_token })).status).toBe(200);
    const refused = await postMcp(t.body.access_token, initialize());
    expect(refused.status).toBe(401);
    const challenge = refused.headers.get('www-authenticate') ?? '';
    expect(challenge).toContain(`resource_metadata="${publicUrl}/.well-known/oauth-protected-resource"`);
    expect(challenge).toContain('error="invalid_token"');

    const refreshed = await tokenRequest(stack, {
      grant_type: 'refresh_token',
      refresh_token: t.body.refresh_token,
      client_id: t.clientId,
      resource: `${publicUrl}/mcp`,
    });
    expect(refreshed.status).toBe(200);
    expect((await postMcp(refreshed.body.access_token, initialize())).status).toBe(200);
  });

  it("a token signed for another deployment's /mcp is refused, and no token is issued for a resource not served here", async () => {
    const t = await accessToken();
    const grantId = (await stack.api('GET', '/api/oauth/grants', { token: t.body.access_token })).body[0].id as string;
    const claims = await stack.service.core.tokens.verify(t.body.access_token);
    const foreign = await stack.service.core.tokens.issue(
      { ...claims, grantId, audience: 'https://other.example/mcp' },
      60,
    );
    expect((await postMcp(foreign, initialize())).status).toBe(401);

    const again = await tokenRequest(stack, {
      grant_type: 'refresh_token',
      refresh_token: t.body.refresh_token,
      client_id: t.clientId,
      resource: 'https://other.example/mcp',
    });
    expect(again.status).toBe(400);
    expect(again.body.error).toBe('invalid_target');
    const { challenge } = pkce();
    const denied = await fetch(
      authorizeUrl(stack, {
        clientId: t.clientId,
        redirectUri: REDIRECT,
        challenge,
        extra: { resource: 'https://other.example/mcp' },
      }),
      { redirect: 'manual' },
    );
    expect(new URL(denied.headers.get('location') ?? 'http://x/').searchParams.get('error')).toBe('invalid_target');
  });
});
