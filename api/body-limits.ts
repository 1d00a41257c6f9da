import express, { type RequestHandler } from 'express';

/** Largest JSON body of a send, a batch or an attachment upload (attachments travel base64 inside them). */
export const LARGE_JSON_LIMIT = '30mb';
/** Largest JSON body everywhere else: enough for any management call, small enough to parse cheaply. */
export const SMALL_JSON_LIMIT = '100kb';

const LARGE_REST = new Set(['/v1/send', '/v1/send/batch', '/v1/attachments']);
const LARGE_TRPC = new Set(['send.single', 'send.batch', 'attachments.upload']);
const JSON_TYPES = ['application/json', 'application/*+json'];

/** True for the routes SPEC.md lets carry large bodies, over REST or tRPC (a batch only when every call is one). */
export function takesLargeBody(path: string): boolean {
  if (LARGE_REST.has(path)) return true;
  if (!path.startsWith('/trpc/')) return false;
  const procedures = decodeURIComponent(path.slice('/trpc/'.length)).split(',');
  return procedures.length > 0 && procedures.every((p) => LARGE_TRPC.has(p));
}

/**
 * The JSON body parser, sized by route before a byte is parsed: 30 MB for send, batch and attachment
 * uploads sent with a credential, 100 KB for everything else. A larger body is refused with 413 while it streams in.
 */
export function jsonBodyParser(): RequestHandler {
  const large = express.json({ limit: LARGE_JSON_LIMIT, type: JSON_TYPES });
  const small = express.json({ limit: SMALL_JSON_LIMIT, type: JSON_TYPES });
  // An anonymous caller never gets the large limit: it would be parsed only to answer 401.
  return (req, res, next) => (takesLargeBody(req.path) && req.get('authorization') ? large : small)(req, res, next);
}
