import { rateLimitRefusals } from './metrics.js';
/**
 * The one error family of the service. Core throws these with an HTTP status (never a protocol's own
 * reply code), a stable machine `code` and whether trying again may help (`retryable`); each edge maps
 * them: REST to {error, code} with `status`, tRPC to TRPCError, SMTP by `code` and `retryable` in
 * smtp/replies.ts, IMAP in smtp/imap/answers.ts, activities to a non-retryable ApplicationFailure when
 * `retryable` is false.
 */
export class AppError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly retryable = false,
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
    this.name = 'AppError';
  }
}

export const badRequest = (message: string, code = 'bad_request', details?: Record<string, unknown>) =>
  new AppError(400, code, message, false, details);
export const unauthorized = (message = 'Missing or invalid credentials', code = 'unauthorized') =>
  new AppError(401, code, message);
export const forbidden = (message: string, code = 'forbidden') => new AppError(403, code, message);
export const notFound = (message = 'Not found', code = 'not_found') => new AppError(404, code, message);
export const conflict = (message: string, code = 'conflict') => new AppError(409, code, message);
export const gone = (message: string, code = 'gone') => new AppError(410, code, message);
/** A refusal by a rate limit or cap (429), counted in svc_rate_limit_refusals_total as it is made. */
export const tooMany = (message: string, code = 'rate_limited', retryAfterSeconds = 60) => {
  rateLimitRefusals.inc({ code });
  return new AppError(429, code, message, true, { retryAfter: retryAfterSeconds });
};
export const unavailable = (message: string, code = 'unavailable') => new AppError(503, code, message, true);

export function isAppError(err: unknown): err is AppError {
  return err instanceof AppError;
}
