import express, { type RequestHandler } from 'express';

/** Largest JSON body of a send, a batch or an attachment upload (attachments travel base64 inside them). */
export const LARGE_JSON_LIMIT = '30mb';
/** Largest JSON body of a template (html and text of up to 512 KB each). */
export const TEMPLATE_JSON_LIMIT = '2mb';
/** Largest JSON body everywhere else: enough for any management call, small enough to parse cheaply. */
export const SMALL_JSON_LIMIT = '100kb';

type Size = 'large' | 'template' | 'small';
const REST: [RegExp, Size][] = [
  [/^\/v1\/send(\/batch)?$/, 'large'], [/^\/v1\/attachments$/, 'large'], [/^\/api\/templates(\/[^/]+)?$/, 'template'],
];
const TRPC: Record<string, Size> = { 'send.single': 'large', 'send.batch': 'large', 'attachments.upload': 'large', 'templates.create': 'template', 'templates.update': 'template' };
const ORDER: Size[] = ['small', 'template', 'large'];

/** The body size a route may take, over REST or tRPC (a batch takes the smallest of its calls' sizes). */
export function bodySizeOf(path: string): Size {
  const rest = REST.find(([re]) => re.test(path));
  if (rest) return rest[1];
  if (!path.startsWith('/trpc/')) return 'small';
  const sizes = decodeURIComponent(path.slice('/trpc/'.length)).split(',').map((p) => TRPC[p] ?? 'small');
  return ORDER[Math.min(...sizes.map((s) => ORDER.indexOf(s)))]!;
}

const JSON_TYPES = ['application/json', 'application/*+json'];

/**
 * The JSON body parser, sized by route before a byte is parsed: 30 MB for send, batch and attachment
 * uploads, 2 MB for templates, both only when a credential is sent; 100 KB for everything else. A larger
 * body is refused with 413 while it streams in.
 */
export function jsonBodyParser(): RequestHandler {
  const parsers: Record<Size, RequestHandler> = {
    large: express.json({ limit: LARGE_JSON_LIMIT, type: JSON_TYPES }),
    template: express.json({ limit: TEMPLATE_JSON_LIMIT, type: JSON_TYPES }),
    small: express.json({ limit: SMALL_JSON_LIMIT, type: JSON_TYPES }),
  };
  // An anonymous caller never gets more than the small limit: its body would be parsed only to answer 401.
  return (req, res, next) => parsers[req.get('authorization') ? bodySizeOf(req.path) : 'small'](req, res, next);
}
