import { AppError } from '../errors.js';

/**
 * An OAuth protocol error (RFC 6749 §5.2, RFC 7591 §3.2.2, RFC 7009): `code` is the registered error
 * name and the message its `error_description`; the OAuth routes answer `{error, error_description}`.
 */
export const oauthError = (error: string, description: string, status = 400) =>
  new AppError(status, error, description);

/** A missing or malformed parameter (RFC 6749 §5.2). */
export const invalidRequest = (description: string) => oauthError('invalid_request', description);
/** A code or refresh token that is unknown, used, expired, or not this client's (RFC 6749 §5.2). */
export const invalidGrant = (description: string) => oauthError('invalid_grant', description);
