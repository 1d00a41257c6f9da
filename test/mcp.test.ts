import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { and, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schema } from '../db/index.js';
import { callTool, postInitialize, connectMcp } from './helpers/mcp.js';
import { freePort } from './helpers/ports.js';
import { FROM_DOMAIN, startSendingStack, type SendingStack } from './helpers/sending.js';

/**
 * The MCP server at /mcp, driven by the MCP SDK's own client over Streamable HTTP (issue 26). No browser here:
 * the consent walk in Chromium is test/mcp-browser.test.ts.
 */
let env: SendingStack;
let publicUrl: string;
let acmeId: string;
let otherDomain: { id: string; domain: string };
const FROM = `Acme <agent@${FROM_DOMAIN}>`;
const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;

beforeAll(async () => {
  const port = await freePort();
  // PUBLIC_URL is the loopback address the client calls: the client checks that the metadata names the URL it used.
  env = await startSendingStack({ env: { PORT: String(port), PUBLIC_URL: `http://127.0.0.1:${port}` } });
  publicUrl = env.stack.config.publicUrl;
  otherDomain = (
    await env.stack.api('POST', '/api/domains/subdomain', { token: env.session, body: { subdomain: 'other' } })
  ).body.domain;
  acmeId = (await env.stack.api('GET', '/api/domains', { token: env.session })).body.find(
    (d: any) => d.domain === FROM_DOMAIN,
  ).id;
});
afterAll(async () => {
  await env?.stop();
});

const postMcp = (headers: Record<string, string> = {}) => postInitialize(publicUrl, headers);

describe('authorization per the MCP specification', () => {
  it('answers a request without a credential 401 with the protected resource metadata, which names this server', async () => {
    const res = await postMcp();
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toBe(
      `Bearer resource_metadata="${publicUrl}/.well-known/oauth-protected-resource"`,
    );
    expect(await res.json()).toMatchObject({ code: 'unauthorized' });

    const meta = await (await fetch(`${publicUrl}/.well-known/oauth-protected-resource`)).json();
    expect(meta).toMatchObject({
      resource: `${publicUrl}/mcp`,
      authorization_servers: [publicUrl],
      scopes_supported: ['mcp'],
      bearer_methods_supported: ['header'],
    });
    // The path-aware location (RFC 9728 §3.1) answers the same document.
    expect(await (await fetch(`${publicUrl}/.well-known/oauth-protected-resource/mcp`)).json()).toEqual(meta);
    const as = await (await fetch(`${publicUrl}/.well-known/oauth-authorization-server`)).json();
    expect(as).toMatchObject({
      issuer: publicUrl,
      registration_endpoint: `${publicUrl}/oauth/register`,
      code_challenge_methods_supported: ['S256'],
    });
  });

  it('answers a bad credential 401 invalid_token, and a session token or a GET without a session as HTTP says', async () => {
    const bad = await postMcp({ authorization: 'Bearer svc_live_not_a_key' });
    expect(bad.status).toBe(401);
    expect(bad.headers.get('www-authenticate')).toMatch(
      /^Bearer resource_metadata="[^"]+", error="invalid_token", error_description="[^"]+"$/,
    );
    expect((await postMcp({ authorization: `Bearer ${env.session}` })).status).toBe(403);
    const get = await fetch(`${publicUrl}/mcp`, {
      headers: { authorization: `Bearer ${env.key}`, accept: 'text/event-stream' },
    });
    expect(get.status).toBe(405);
  });
});

describe('tools generated from the operation definitions', () => {
  it('gives every tool a title, annotations and input and output schemas that are valid JSON Schema 2020-12', async () => {
    const client = await connectMcp(publicUrl, { bearer: env.key });
    const { tools } = await client.listTools();
    expect(tools.length).toBeGreaterThanOrEqual(30);
    const ajv = new Ajv2020({ allErrors: true, strict: false });
    addFormats(ajv);
    for (const tool of tools) {
      expect(tool.title, tool.name).toBeTruthy();
      expect(tool.inputSchema.type, tool.name).toBe('object');
      expect(ajv.validateSchema(tool.inputSchema), `${tool.name}: ${ajv.errorsText()}`).toBe(true);
      expect(ajv.validateSchema(tool.outputSchema!), `${tool.name} output: ${ajv.errorsText()}`).toBe(true);
      ajv.compile(tool.inputSchema);
      ajv.compile(tool.outputSchema!);
      expect(tool.annotations).toMatchObject({
        title: tool.title,
        readOnlyHint: expect.any(Boolean),
        destructiveHint: expect.any(Boolean),
        idempotentHint: expect.any(Boolean),
      });
    }
    const byName = new Map(tools.map((t) => [t.name, t]));
    expect(byName.get('messages_list')!.annotations).toMatchObject({ readOnlyHint: true });
    expect(byName.get('scheduled_cancel')!.annotations).toMatchObject({
      readOnlyHint: false,
      destructiveHint: true,
      idempotentHint: true,
    });
    expect(byName.get('send')!.annotations).toMatchObject({
      readOnlyHint: false,
      destructiveHint: false,
      idempotentHint: false,
      openWorldHint: true,
    });
    // Creates take an idempotency key; reads do not.
    expect(Object.keys(byName.get('send')!.inputSchema.properties!)).toContain('idempotencyKey');
    expect(Object.keys(byName.get('messages_list')!.inputSchema.properties!)).not.toContain('idempotencyKey');
    // The send tool's input is the REST body: an example the schema accepts is one the API sends.
    const validSend = ajv.compile(byName.get('send')!.inputSchema);
    expect(validSend({ from: FROM, to: 'x@rcpt.test', subject: 's', text: 't' })).toBe(true);
    expect(validSend({ from: FROM, to: 'x@rcpt.test', bogus: 1 })).toBe(false);
    await client.close();
  });

  it('answers errors as tool errors carrying the API code', async () => {
    const client = await connectMcp(publicUrl, { bearer: env.key });
    expect(await callTool(client, 'messages_get', { id: 'msg_doesnotexistdoesnotexist' })).toMatchObject({
      isError: true,
      error: { code: 'not_found' },
    });
    expect(await callTool(client, 'send', { from: FROM, subject: 'no recipient', text: 't' })).toMatchObject({
      isError: true,
      error: { code: 'validation_error' },
    });
    expect(
      await callTool(client, 'send', { from: 'me@unverified.example', to: 'x@rcpt.test', subject: 's', text: 't' }),
    ).toMatchObject({ isError: true, error: { code: 'domain_not_verified' } });
    await expect(client.callTool({ name: 'no_such_tool', arguments: {} })).rejects.toThrow(/Unknown tool/);
    await client.close();
  });

  it('replays a send with the same idempotency key: one message, the same answer', async () => {
    const client = await connectMcp(publicUrl, { bearer: env.key });
    const args = {
      from: FROM,
      to: 'mcp-once@rcpt.test',
      subject: 'Only once over MCP',
      text: 't',
      idempotencyKey: 'mcp-send-1',
    };
    const first = await callTool(client, 'send', args);
    const again = await callTool(client, 'send', args);
    expect(first).toMatchObject({ isError: false, replayed: false });
    expect(again).toMatchObject({ isError: false, replayed: true, data: first.data });
    expect(await callTool(client, 'send', { ...args, subject: 'another body' })).toMatchObject({
      isError: true,
      error: { code: 'idempotency_key_reused' },
    });
    const rows = await env.stack.service.core.db
      .select()
      .from(schema.messages)
      .where(eq(schema.messages.subject, 'Only once over MCP'));
    expect(rows.map((r) => r.id)).toEqual([first.data.id]);
    await client.close();
  });
});

describe('what a credential sees', () => {
  it("a domain-scoped key sees only its domain's tools and data, and is refused outside its domain", async () => {
    const key = (
      await env.stack.api('POST', '/api/keys/scoped', {
        token: env.session,
        body: { domainId: acmeId, name: 'mcp agent' },
      })
    ).body.key;
    const elsewhere = (
      await env.stack.api('POST', '/v1/send', {
        token: env.key,
        body: { from: `x@${otherDomain.domain}`, to: 'y@rcpt.test', subject: 'other domain', text: 't' },
      })
    ).body.id;
    const client = await connectMcp(publicUrl, { bearer: key });
    const names = (await client.listTools()).tools.map((t) => t.name);
    expect(names).toEqual(
      expect.arrayContaining([
        'send',
        'send_batch',
        'messages_list',
        'messages_get',
        'domains_list',
        'domains_get',
        'routes_list',
        'me',
      ]),
    );
    // Account-wide resources are not the scoped key's, on REST or here.
    for (const accountWide of [
      'broadcasts_create',
      'contacts_list',
      'lists_create',
      'events_record',
      'suppressions_add',
      'templates_list',
    ])
      expect(names).not.toContain(accountWide);

    expect((await callTool(client, 'domains_list')).data.items.map((d: any) => d.domain)).toEqual([FROM_DOMAIN]);
    expect((await callTool(client, 'me')).data.sendingDomains).toEqual([FROM_DOMAIN]);
    expect(await callTool(client, 'domains_get', { id: otherDomain.id })).toMatchObject({
      isError: true,
      error: { code: 'not_found' },
    });
    expect(await callTool(client, 'messages_get', { id: elsewhere })).toMatchObject({
      isError: true,
      error: { code: 'not_found' },
    });
    expect(
      await callTool(client, 'send', { from: `x@${otherDomain.domain}`, to: 'z@rcpt.test', subject: 's', text: 't' }),
    ).toMatchObject({ isError: true, error: { code: 'domain_not_verified' } });
    // A tool the key does not see cannot be called by name either.
    await expect(client.callTool({ name: 'contacts_list', arguments: {} })).rejects.toThrow(/Unknown tool/);
    expect(
      await callTool(client, 'send', { from: FROM, to: 'scoped-mcp@rcpt.test', subject: 's', text: 't' }),
    ).toMatchObject({ isError: false });
    await client.close();
  });

  it("another account's key sees nothing of this account", async () => {
    const s = (
      await env.stack.api('POST', '/api/auth/signup', {
        body: { email: 'stranger@example.com', password: 'stranger password' },
      })
    ).body.token;
    const strangerKey = (await env.stack.api('GET', '/api/keys', { token: s })).body.key;
    const mine = (
      await env.stack.api('POST', '/v1/send', {
        token: env.key,
        body: { from: FROM, to: 'private@rcpt.test', subject: 'mine', text: 't' },
      })
    ).body.id;
    const client = await connectMcp(publicUrl, { bearer: strangerKey });
    expect(await callTool(client, 'messages_get', { id: mine })).toMatchObject({
      isError: true,
      error: { code: 'not_found' },
    });
    expect(await callTool(client, 'domains_get', { id: acmeId })).toMatchObject({
      isError: true,
      error: { code: 'not_found' },
    });
    expect((await callTool(client, 'messages_list')).data.items).toEqual([]);
    await client.close();
  });

  it('an app password with api sees the mailbox tools only', async () => {
    const pw = await env.stack.api('POST', '/api/app-passwords', {
      token: env.session,
      body: { domain: FROM_DOMAIN, protocols: ['api'], label: 'agent' },
    });
    expect(pw.status).toBe(201);
    const client = await connectMcp(publicUrl, { bearer: pw.body.secret });
    expect((await client.listTools()).tools.map((t) => t.name).sort()).toEqual(['mailbox_list', 'mailbox_raw']);
    expect(await callTool(client, 'mailbox_list')).toMatchObject({
      isError: false,
      data: { messages: [], nextBefore: null },
    });
    await client.close();
    const [row] = await env.stack.service.core.db
      .select()
      .from(schema.appPasswords)
      .where(and(eq(schema.appPasswords.id, pw.body.id)));
    expect(row!.lastUsedAt).not.toBeNull();
  });
});
