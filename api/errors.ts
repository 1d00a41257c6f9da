import type { ErrorRequestHandler, Request, RequestHandler, Response } from 'express';
import { z } from 'zod';
import { AppError, badRequest } from '../core/errors.js';
import { logError } from '../core/log.js';

/** Formats zod issues as one readable line: `field: message; other: message`. */
export function describeIssues(issues: readonly z.core.$ZodIssue[], prefix?: string): string {
  return issues
    .map((i) => {
      const path = [prefix, ...i.path.map(String)].filter(Boolean).join('.');
      const msg =
        i.code === 'unrecognized_keys'
          ? `unknown field(s) ${i.keys.map((k) => `"${k}"`).join(', ')} not allowed`
          : i.message;
      return path ? `${path}: ${msg}` : msg;
    })
    .join('; ');
}

export function validationError(issues: readonly z.core.$ZodIssue[], prefix?: string): AppError {
  return badRequest(describeIssues(issues, prefix), 'validation_error');
}

/** DESIGN.md error body: `{"error": "<message>", "code": "<machine_code>"}`; 429 carries Retry-After. */
export function sendError(res: Response, err: AppError): void {
  const retryAfter = err.details?.retryAfter;
  if (err.status === 429 && typeof retryAfter === 'number') res.set('Retry-After', String(retryAfter));
  res.status(err.status).json({ error: err.message, code: err.code });
}

/** Unknown routes answer a JSON 404 like everything else. */
export const notFoundHandler: RequestHandler = (req, res) => {
  sendError(res, new AppError(404, 'not_found', `No route for ${req.method} ${req.path}`));
};

/** How much of a body left unread by an early answer is read and dropped, and for how long, before the connection is cut. */
export const LINGER = { bytes: 1024 * 1024, ms: 1000 };

/**
 * After an answer sent before the request's body was read (401 ahead of a large body, 413 past a limit):
 * the rest is read and dropped, never kept, so the client can read the answer (a connection closed on
 * unread data is reset, and the answer lost with it), but only up to LINGER's bytes; past them reading
 * stops, and at LINGER's time the connection is cut. A short remainder ends in time and the connection serves its next request.
 */
function discardRest(req: Request): void {
  let seen = 0;
  const cut = () => req.socket.destroy();
  const timer = setTimeout(cut, LINGER.ms);
  const stop = () => clearTimeout(timer);
  req.on('data', (chunk: Buffer) => {
    seen += chunk.length;
    // Past the byte bound nothing more is read: the client's writes stall on a closed window while it reads
    // the answer, and the timer cuts the connection. Cutting here would reset it with the answer maybe unread.
    if (seen > LINGER.bytes) req.pause();
  });
  req.once('end', stop);
  req.socket.once('close', stop);
  req.resume();
}

/** Maps anything thrown to the error body; unexpected errors are logged and answered as a plain 500. */
export const errorHandler: ErrorRequestHandler = (err, req, res, _next) => {
  if (res.headersSent) return;
  if (!req.complete) discardRest(req);
  if (err instanceof AppError) return sendError(res, err);
  const type = (err as { type?: string }).type;
  if (type === 'entity.parse.failed') return sendError(res, badRequest('Malformed JSON body', 'invalid_json'));
  if (type === 'entity.too.large')
    return sendError(res, new AppError(413, 'payload_too_large', 'Request body is too large'));
  if (type === 'encoding.unsupported' || type === 'charset.unsupported')
    return sendError(res, new AppError(415, 'unsupported_media_type', (err as Error).message));
  if (err instanceof z.ZodError) return sendError(res, validationError(err.issues));
  const status = (err as { status?: number }).status;
  if (typeof status === 'number' && status >= 400 && status < 500)
    return sendError(res, new AppError(status, 'bad_request', (err as Error).message));
  logError(`[api] ${req.method} ${req.path} failed`, err);
  sendError(res, new AppError(500, 'internal_error', 'Internal server error'));
};
