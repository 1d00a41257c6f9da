import type { OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type {
  OAuthClientInformationMixed,
  OAuthClientMetadata,
  OAuthTokens,
} from '@modelcontextprotocol/sdk/shared/auth.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';

/**
 * The OAuth side of an MCP client that knows only the server's URL: it registers itself, keeps what the
 * SDK hands it, and records where it would send the person (the test opens that page in Chromium).
 */
export class MemoryOAuthProvider implements OAuthClientProvider {
  authorizationUrl: URL | undefined;
  private client: OAuthClientInformationMixed | undefined;
  private saved: OAuthTokens | undefined;
  private verifier = '';
  constructor(
    readonly redirectUrl: string,
    readonly clientName = 'Test MCP agent',
  ) {}

  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: this.clientName,
      redirect_uris: [this.redirectUrl],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  }
  clientInformation() {
    return this.client;
  }
  saveClientInformation(info: OAuthClientInformationMixed) {
    this.client = info;
  }
  tokens() {
    return this.saved;
  }
  saveTokens(tokens: OAuthTokens) {
    this.saved = tokens;
  }
  redirectToAuthorization(url: URL) {
    this.authorizationUrl = url;
  }
  saveCodeVerifier(verifier: string) {
    this.verifier = verifier;
  }
  codeVerifier() {
    return this.verifier;
  }
}

/** An MCP SDK client over Streamable HTTP to `<base>/mcp`, with a bearer credential (API key, app password) or an OAuth provider. */
export async function connectMcp(
  baseUrl: string,
  auth: { bearer: string } | { provider: OAuthClientProvider },
): Promise<Client> {
  const url = new URL('/mcp', baseUrl);
  const transport =
    'bearer' in auth
      ? new StreamableHTTPClientTransport(url, { requestInit: { headers: { Authorization: `Bearer ${auth.bearer}` } } })
      : new StreamableHTTPClientTransport(url, { authProvider: auth.provider });
  const client = new Client({ name: 'svc-mail-tests', version: '1.0.0' });
  await client.connect(transport);
  return client;
}

/** A tool call's answer: the structured content, or the `{error, code}` of a tool error. */
export async function callTool(client: Client, name: string, args: Record<string, unknown> = {}) {
  const result = (await client.callTool({ name, arguments: args })) as CallToolResult;
  const text = result.content.find((c) => c.type === 'text')?.text ?? '';
  return {
    isError: result.isError === true,
    data: result.structuredContent as any,
    error: result.isError ? (JSON.parse(text) as { error: string; code: string }) : undefined,
    replayed: result._meta?.idempotentReplayed === true,
  };
}

/** A bare JSON-RPC `initialize` POSTed to `<publicUrl>/mcp` (what curl would send), with extra headers. */
export function postInitialize(publicUrl: string, headers: Record<string, string> = {}): Promise<Response> {
  const initialize = {
    jsonrpc: '2.0',
    id: 1,
    method: 'initialize',
    params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'curl', version: '1' } },
  };
  return fetch(`${publicUrl}/mcp`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body: JSON.stringify(initialize),
  });
}
