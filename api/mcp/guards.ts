import express, { type RequestHandler } from 'express';
import type { CredentialKind } from '../../core/tenancy.js';
import { AppError } from '../../core/errors.js';
import type { Core } from '../../core/index.js';
import {
  bodySizeOf,
  IMPORT_BODY_LIMIT,
  LARGE_JSON_LIMIT,
  SMALL_JSON_LIMIT,
  TEMPLATE_JSON_LIMIT,
} from '../body-limits.js';
import type { McpTool } from './tools.js';

const originOf = (url: string) => {
  try {
    return new URL(url).origin;
  } catch {
    return undefined;
  }
};

/**
 * A browser page may call /mcp only from PUBLIC_URL's origin or one of MCP_ALLOWED_ORIGINS (the MCP
 * transport's rule against DNS rebinding: a page that rebinds its name to this server would otherwise
 * talk to it). No `Origin` header is a client that is not a browser, and is fine.
 */
export function mcpOrigin(core: Pick<Core, 'config'>): RequestHandler {
  const allowed = new Set([core.config.publicUrl, ...core.config.mcpAllowedOrigins].map(originOf).filter(Boolean));
  return (req, _res, next) => {
    const origin = req.get('origin');
    if (origin === undefined || allowed.has(origin)) return next();
    next(
      new AppError(
        403,
        'forbidden_origin',
        `Requests from the origin ${JSON.stringify(origin.slice(0, 200))} are not accepted: only ${[...allowed].join(', ')} (MCP_ALLOWED_ORIGINS adds more)`,
      ),
    );
  };
}

const SIZES = {
  small: SMALL_JSON_LIMIT,
  template: TEMPLATE_JSON_LIMIT,
  import: IMPORT_BODY_LIMIT,
  large: LARGE_JSON_LIMIT,
} as const;
type Size = keyof typeof SIZES;
const ORDER: Size[] = ['small', 'template', 'import', 'large'];
/** '100kb', '30mb' as bytes (the units express's parsers use: 1 kb = 1024 bytes). */
const bytesOf = (limit: string) => Number.parseInt(limit, 10) * (limit.endsWith('mb') ? 1024 * 1024 : 1024);

/**
 * The body of /mcp, for a caller whose credential is checked: parsed up to the largest REST limit, then
 * held to the limit of the REST route of the tool it calls (30 MB for send, 2 MB for a template, 100 KB
 * for every other message, tools/list and initialize among them); a batch gets its smallest.
 */
export function mcpBody(byKind: Map<CredentialKind, readonly McpTool[]>): RequestHandler[] {
  const sizeOfTool = new Map<string, Size>();
  for (const tools of byKind.values())
    for (const t of tools) sizeOfTool.set(t.definition.name, bodySizeOf(t.op.path) as Size);
  const sizeOf = (message: unknown): Size => {
    const m = message as { method?: unknown; params?: { name?: unknown } } | null;
    if (m?.method !== 'tools/call' || typeof m.params?.name !== 'string') return 'small';
    return sizeOfTool.get(m.params.name) ?? 'small';
  };
  const parse = express.json({
    limit: LARGE_JSON_LIMIT,
    type: ['application/json', 'application/*+json'],
    verify: (req, _res, buf) => {
      (req as { mcpBytes?: number }).mcpBytes = buf.length;
    },
  });
  const check: RequestHandler = (req, _res, next) => {
    const bytes = (req as { mcpBytes?: number }).mcpBytes ?? 0;
    const messages: unknown[] = Array.isArray(req.body) ? req.body : [req.body];
    const size = ORDER[Math.min(...messages.map((m) => ORDER.indexOf(sizeOf(m))))] ?? 'small';
    if (bytes <= bytesOf(SIZES[size])) return next();
    next(
      new AppError(
        413,
        'payload_too_large',
        `Request body is too large: ${SIZES[size]} at most for this call, as on REST`,
      ),
    );
  };
  return [parse, check];
}
