import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hasChromium, launchChromium, startRedirectCatcher } from './helpers/browser.js';
import { callTool, postInitialize, MemoryOAuthProvider } from './helpers/mcp.js';
import { freePort } from './helpers/ports.js';
import { FROM_DOMAIN, startSendingStack, type SendingStack } from './helpers/sending.js';

/**
 * The MCP server's OAuth walk as an agent meets it: the MCP SDK's client registers itself and the person
 * consents in Chromium (issue 26). The rest of the MCP tests need no browser: test/mcp.test.ts.
 */
let env: SendingStack;
let browser: Browser;
let publicUrl: string;
const FROM = `Acme <agent@${FROM_DOMAIN}>`;

beforeAll(async () => {
  const port = await freePort();
  [env, browser] = await Promise.all([
    // PUBLIC_URL is the loopback address the client calls: the client checks that the metadata names the URL it used.
    startSendingStack({ env: { PORT: String(port), PUBLIC_URL: `http://127.0.0.1:${port}` } }),
    launchChromium(),
  ]);
  publicUrl = env.stack.config.publicUrl;
});
afterAll(async () => {
  await browser?.close();
  await env?.stop();
});

const postMcp = (headers: Record<string, string> = {}) => postInitialize(publicUrl, headers);

describe.skipIf(!hasChromium())('authorization per the MCP specification, in a browser', () => {
  it('an MCP client that knows only /mcp registers itself, sends the person through consent in Chromium, and sends mail', async () => {
    const agent = await startRedirectCatcher('/mcp/callback', 'back at the agent');
    const redirect = agent.url;
    const provider = new MemoryOAuthProvider(redirect, 'Chromium MCP agent');
    const url = new URL('/mcp', publicUrl);
    const first = new Client({ name: 'agent', version: '1.0.0' });
    await expect(first.connect(new StreamableHTTPClientTransport(url, { authProvider: provider }))).rejects.toThrow(
      UnauthorizedError,
    );
    // It registered by itself (RFC 7591) and asked for the `mcp` scope the metadata offers.
    expect(provider.clientInformation()?.client_id).toMatch(/^oac_/);
    const authorize = provider.authorizationUrl!;
    expect(authorize.origin + authorize.pathname).toBe(`${publicUrl}/oauth/authorize`);
    expect(authorize.searchParams.get('scope')).toBe('mcp');
    expect(authorize.searchParams.get('code_challenge_method')).toBe('S256');

    const context = await browser.newContext();
    const page = await context.newPage();
    const returned = agent.next();
    await page.goto(authorize.href);
    expect(await page.locator('main').innerText()).toContain('Chromium MCP agent');
    const signin = page.getByRole('form', { name: 'Sign in' });
    await signin.getByLabel('Email').fill('sender@example.com');
    await signin.getByLabel('Password').fill('sender password');
    await signin.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('button', { name: 'Approve' }).click();
    const back = await returned;
    await context.close();
    await agent.close();
    expect(back.searchParams.get('iss')).toBe(publicUrl);

    const transport = new StreamableHTTPClientTransport(url, { authProvider: provider });
    await transport.finishAuth(back.searchParams.get('code')!);
    expect(provider.tokens()?.access_token).toBeTruthy();
    const client = new Client({ name: 'agent', version: '1.0.0' });
    await client.connect(transport);
    const { tools } = await client.listTools();
    const names = tools.map((t) => t.name);
    expect(names).toEqual(
      expect.arrayContaining([
        'send',
        'send_batch',
        'messages_list',
        'messages_get',
        'domains_add',
        'domains_get',
        'broadcasts_create',
        'broadcasts_send',
        'events_record',
        'contacts_list',
      ]),
    );
    // Account secrets are never tools (SPEC.md: the webhook secret is for server-side use only).
    expect(names.some((n) => /key|password|secret|grant/.test(n))).toBe(false);
    const sent = await callTool(client, 'send', {
      from: FROM,
      to: 'mcp-oauth@rcpt.test',
      subject: 'Sent by an agent',
      text: 'Hello from MCP',
    });
    expect(sent).toMatchObject({ isError: false, data: { status: 'queued' } });
    const got = await env.sink.waitFor((r) => r.to.includes('mcp-oauth@rcpt.test'));
    expect(got.raw.toString()).toContain('Subject: Sent by an agent');
    const read = await callTool(client, 'messages_get', { id: sent.data.id });
    expect(read.data.message).toMatchObject({ id: sent.data.id, direction: 'outbound' });
    await client.close();

    // Unlinking the agent in the account stops its token at once.
    const grant = (await env.stack.api('GET', '/api/oauth/grants', { token: env.session })).body.find(
      (g: any) => g.client_name === 'Chromium MCP agent',
    );
    expect((await env.stack.api('DELETE', `/api/oauth/grants/${grant.id}`, { token: env.session })).status).toBe(200);
    const revoked = await postMcp({ authorization: `Bearer ${provider.tokens()!.access_token}` });
    expect(revoked.status).toBe(401);
    expect(revoked.headers.get('www-authenticate')).toContain('error="invalid_token"');
  });
});
