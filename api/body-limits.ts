import express, { type Express, type Request, type RequestHandler } from 'express';
import type { Core } from '../core/index.js';
import { importContacts } from './ops/lists.js';
import { authenticateEarly, contextFor } from './rest.js';

/** Largest JSON body of a send, a batch or an attachment upload (attachments travel base64 inside them). */
export const LARGE_JSON_LIMIT = '30mb';
/** Largest body of a CSV import: the CSV as `text/csv`, or the JSON `{csv}` (core/contacts/imports.ts caps the CSV at 5 MB). */
export const IMPORT_BODY_LIMIT = '6mb';
/** Largest JSON body of a template (html and text of up to 512 KB each). */
export const TEMPLATE_JSON_LIMIT = '2mb';
/** Largest JSON body everywhere else: enough for any management call, small enough to parse cheaply. */
export const SMALL_JSON_LIMIT = '100kb';

type Size = 'large' | 'import' | 'template' | 'small';
const REST: [RegExp, Size][] = [
  [/^\/v1\/send(\/batch)?$/, 'large'],
  [/^\/v1\/attachments$/, 'large'],
  [/^\/api\/lists\/[^/]+\/import$/, 'import'],
  [/^\/api\/templates(\/[^/]+)?$/, 'template'],
];
const TRPC: Record<string, Size> = {
  'send.single': 'large',
  'send.batch': 'large',
  'attachments.upload': 'large',
  'lists.import': 'import',
  'templates.create': 'template',
  'templates.update': 'template',
};
const ORDER: Size[] = ['small', 'template', 'import', 'large'];
const LIMITS: Record<Size, string> = {
  large: LARGE_JSON_LIMIT,
  import: IMPORT_BODY_LIMIT,
  template: TEMPLATE_JSON_LIMIT,
  small: SMALL_JSON_LIMIT,
};

/** The body size a route may take, over REST or tRPC (a batch takes the smallest of its calls' sizes). */
export function bodySizeOf(path: string): Size {
  const rest = REST.find(([re]) => re.test(path));
  if (rest) return rest[1];
  if (!path.startsWith('/trpc/')) return 'small';
  const sizes = decodeURIComponent(path.slice('/trpc/'.length))
    .split(',')
    .map((p) => TRPC[p] ?? 'small');
  return ORDER[Math.min(...sizes.map((s) => ORDER.indexOf(s)))]!;
}

const JSON_TYPES = ['application/json', 'application/*+json'];
/** Routes that check their credential themselves (their own answer to a bad one) and then parse their body (/mcp: api/mcp/guards.ts). */
const SELF_AUTHENTICATING = [/^\/mcp$/];

/**
 * The JSON body parser, sized by route before a byte is parsed: 30 MB for send, batch and attachment
 * uploads, 6 MB for CSV imports, 2 MB for templates, and those only once the credential sent with the
 * request is checked (`authenticateEarly`): a bad one is answered 401 with the body unread and the
 * connection closed. A caller without a credential, and every other route, gets 100 KB. A larger body
 * is refused with 413 while it streams in.
 */
export function jsonBodyParser(core: Pick<Core, 'auth'>): RequestHandler {
  const parser = (size: Size): RequestHandler => express.json({ limit: LIMITS[size], type: JSON_TYPES });
  const parsers: Record<Size, RequestHandler> = {
    large: parser('large'),
    import: parser('import'),
    template: parser('template'),
    small: parser('small'),
  };
  return (req, res, next) => {
    if (SELF_AUTHENTICATING.some((re) => re.test(req.path))) return next();
    const size = req.get('authorization') && req.is(JSON_TYPES) ? bodySizeOf(req.path) : 'small';
    if (size === 'small') return parsers.small(req, res, next);
    authenticateEarly(req, core).then(() => parsers[size](req, res, next), next);
  };
}

/**
 * POST /api/lists/:id/import takes the CSV itself as `text/csv` too: it becomes the `{csv}` body the
 * operation reads. The credential is checked (the operation's own rules) before a byte of it is read.
 */
export function mountImportBody(app: Express, core: Core): void {
  const isCsv = (req: Request) => Boolean(req.is(['text/csv', 'text/plain']));
  app.post(
    '/api/lists/:id/import',
    async (req, _res, next) => {
      if (isCsv(req)) await contextFor(importContacts, req, core);
      next();
    },
    express.text({ type: ['text/csv', 'text/plain'], limit: IMPORT_BODY_LIMIT }),
    (req, _res, next) => {
      if (typeof req.body === 'string') req.body = { csv: req.body };
      next();
    },
  );
}
