import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { CallToolRequestSchema, ErrorCode, ListToolsRequestSchema, McpError } from '@modelcontextprotocol/sdk/types.js';
import type { Express, Request, RequestHandler, Response } from 'express';
import { requireKind } from '../../core/auth.js';
import { actorOf, type CredentialKind, type Principal } from '../../core/tenancy.js';
import { AppError } from '../../core/errors.js';
import type { Core } from '../../core/index.js';
import { mcpBody, mcpOrigin } from './guards.js';
import type { AuthedContext, Operation } from '../contract.js';
import { callTool } from './call.js';
import { buildTools, toolsFor, type McpTool } from './tools.js';

export const MCP_PATH = '/mcp';
export const RESOURCE_METADATA_PATH = '/.well-known/oauth-protected-resource';
/** Who may talk to /mcp: OAuth access tokens (scope `mcp` or `account`), API keys, and app passwords (mailbox tools only). */
const MCP_KINDS: CredentialKind[] = ['oauth', 'account_key', 'scoped_key', 'app_password'];

const INSTRUCTIONS = [
  'svc mail sends and receives email over the verified domains of one account.',
  'Call `me` for the domains this credential may send from; `send` sends one message (give `scheduledAt` to schedule it, `scheduled_cancel` cancels it).',
  'Tools that create or send take `idempotencyKey`: a retry with the same key and arguments within 24 hours answers the first result and does nothing again.',
  'A failed call is a tool error whose text is {"error", "code"}, the same code the REST API answers.',
].join(' ');

/** The RFC 9728 protected resource metadata of /mcp: this service is its own authorization server. */
export function resourceMetadata(publicUrl: string) {
  return {
    resource: `${publicUrl}${MCP_PATH}`,
    authorization_servers: [publicUrl],
    scopes_supported: ['mcp'],
    bearer_methods_supported: ['header'],
    resource_name: 'svc mail MCP server',
    resource_documentation: `${publicUrl}/v1/openapi.json`,
  };
}

/**
 * The MCP server (Streamable HTTP, stateless: every POST carries its credential and is answered on its
 * own, so any API process can answer any request). Tools are the operations marked `mcp`, generated from
 * the same definitions as REST and tRPC; what a credential sees is what it may call there.
 */
export function mountMcp(app: Express, core: Core, ops: readonly Operation[]): void {
  const { publicUrl } = core.config;
  const tools = buildTools(ops);
  const byKind = new Map(MCP_KINDS.map((k) => [k, toolsFor(tools, k)]));
  const metadata = resourceMetadata(publicUrl);
  const challenge = `Bearer resource_metadata="${publicUrl}${RESOURCE_METADATA_PATH}"`;

  for (const path of [RESOURCE_METADATA_PATH, `${RESOURCE_METADATA_PATH}${MCP_PATH}`]) {
    app.options(path, publicCors);
    app.get(path, publicCors, (_req, res) => void res.set('Cache-Control', 'public, max-age=300').json(metadata));
  }

  /** The caller, or 401 with the challenge that leads an MCP client to the metadata and so to OAuth. */
  const principalOf = async (req: Request, res: Response): Promise<Principal> => {
    const header = req.get('authorization');
    try {
      const principal = requireKind(
        await core.auth.authenticate(header, { appPasswords: true, ip: req.ip ?? '' }),
        MCP_KINDS,
      );
      // RFC 8707: an OAuth token is taken here only when it was issued for this endpoint.
      if (principal.kind === 'oauth' && !core.oauth.resources.isMcp(principal.audience)) {
        throw new AppError(
          401,
          'invalid_token',
          `This access token was issued for another resource: ask for one with resource=${core.oauth.resources.mcp}`,
        );
      }
      return principal;
    } catch (err) {
      if (err instanceof AppError && err.status === 401) {
        const why = header ? `, error="invalid_token", error_description="${err.message.replace(/["\\]/g, "'")}"` : '';
        res.set('WWW-Authenticate', `${challenge}${why}`);
      }
      throw err;
    }
  };

  app.options(MCP_PATH, mcpCors);
  // The page's origin first (DNS rebinding, foreign sites), then the credential, then the body within the
  // REST limit of the tool called: a stranger's body is never parsed.
  app.all(
    MCP_PATH,
    mcpCors,
    mcpOrigin(core),
    async (req, res, next) => {
      res.locals.principal = await principalOf(req, res);
      next();
    },
    ...mcpBody(byKind),
    async (req, res) => {
      const principal = res.locals.principal as Principal;
      if (req.method !== 'POST') {
        // Stateless: no session to resume (GET) or end (DELETE).
        return void res
          .status(405)
          .set('Allow', 'POST, OPTIONS')
          .json({
            jsonrpc: '2.0',
            error: { code: -32000, message: 'Method not allowed: this server is stateless, POST each message' },
            id: null,
          });
      }
      const ctx: AuthedContext = {
        core,
        principal,
        actor: actorOf(principal),
        clientIp: req.ip ?? req.socket.remoteAddress ?? '',
      };
      const server = serverFor(byKind.get(principal.kind) ?? [], ctx);
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
      res.on('close', () => {
        void transport.close();
        void server.close();
      });
      await server.connect(transport);
      await transport.handleRequest(req, res, req.body);
    },
  );
}

/**
 * One MCP server per request, for one caller. The low-level Server (the SDK keeps it for advanced use):
 * the tool list is prebuilt JSON Schema, and errors must carry the API's code rather than a bare message.
 */
function serverFor(tools: readonly McpTool[], ctx: AuthedContext): Server {
  const server = new Server(
    { name: 'svc-mail', version: '1.0.0' },
    { capabilities: { tools: { listChanged: false } }, instructions: INSTRUCTIONS },
  );
  const byName = new Map(tools.map((t) => [t.definition.name, t]));
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: tools.map((t) => t.definition) }));
  server.setRequestHandler(CallToolRequestSchema, async (request) => {
    const tool = byName.get(request.params.name);
    if (!tool)
      throw new McpError(
        ErrorCode.InvalidParams,
        `Unknown tool ${JSON.stringify(request.params.name)} (tools/list names the tools this credential may call)`,
      );
    return callTool(tool, request.params.arguments, ctx);
  });
  return server;
}

/** The metadata is public: any origin may read it. */
const publicCors: RequestHandler = (req, res, next) => {
  res.set({
    'Access-Control-Allow-Origin': '*',
    'Access-Control-Allow-Methods': 'GET, OPTIONS',
    'Access-Control-Allow-Headers': 'mcp-protocol-version',
  });
  if (req.method === 'OPTIONS') return void res.status(204).end();
  next();
};

/** CORS for browser-based MCP clients (bearer headers, never cookies); mcpOrigin then refuses the pages of origins not allowed. */
const mcpCors: RequestHandler = (req, res, next) => {
  res.set({
    'Access-Control-Allow-Origin': '*',
    'Access-Control-Allow-Methods': 'GET, POST, DELETE, OPTIONS',
    'Access-Control-Allow-Headers':
      'authorization, content-type, accept, mcp-protocol-version, mcp-session-id, last-event-id',
    'Access-Control-Expose-Headers': 'mcp-session-id, mcp-protocol-version, www-authenticate',
  });
  if (req.method === 'OPTIONS') return void res.status(204).end();
  next();
};
