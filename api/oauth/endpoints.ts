import type { ErrorRequestHandler, Express, NextFunction, Request, RequestHandler, Response } from 'express';
import { AppError } from '../../core/errors.js';
import type { Core } from '../../core/index.js';
import { unsupportedGrant } from '../../core/oauth/token-exchange.js';

/**
 * The machine-facing OAuth endpoints (public; clients authenticate by PKCE): discovery (RFC 8414 and
 * the OpenID path), registration (RFC 7591), token (RFC 6749, form or JSON) and revocation (RFC 7009).
 */
export function mountOAuthEndpoints(app: Express, core: Pick<Core, 'oauth'>): void {
  for (const path of ['/.well-known/oauth-authorization-server', '/.well-known/openid-configuration']) {
    app.options(path, cors);
    app.get(
      path,
      cors,
      (_req, res) => void res.set('Cache-Control', 'public, max-age=300').json(core.oauth.metadata()),
    );
  }

  app.options(['/oauth/register', '/oauth/token', '/oauth/revoke'], cors);

  app.post(
    '/oauth/register',
    cors,
    oauthRoute(async (req, res) => {
      const info = await core.oauth.clients.register(bodyOf(req), req.ip ?? '');
      res.status(201).set('Cache-Control', 'no-store').json(info);
    }),
  );

  app.post(
    '/oauth/token',
    cors,
    oauthRoute(async (req, res) => {
      const b = stringFields(bodyOf(req));
      const result =
        b.grant_type === 'authorization_code'
          ? await core.oauth.exchange.exchangeCode(b)
          : b.grant_type === 'refresh_token'
            ? await core.oauth.exchange.refresh(b)
            : (() => {
                throw unsupportedGrant(b.grant_type);
              })();
      res.set({ 'Cache-Control': 'no-store', Pragma: 'no-cache' }).json(result);
    }),
  );

  app.post(
    '/oauth/revoke',
    cors,
    oauthRoute(async (req, res) => {
      await core.oauth.exchange.revokeToken(stringFields(bodyOf(req)));
      res.set('Cache-Control', 'no-store').status(200).json({});
    }),
  );

  // A malformed body fails in the body parser, before the routes: answer it in the OAuth shape too.
  app.use(['/oauth/register', '/oauth/token', '/oauth/revoke'], ((err, _req, res, next) => {
    const type = (err as { type?: string }).type;
    if (type !== 'entity.parse.failed' && type !== 'entity.too.large') return next(err);
    res
      .status(400)
      .set('Cache-Control', 'no-store')
      .json({ error: 'invalid_request', error_description: 'The request body could not be parsed' });
  }) as ErrorRequestHandler);
}

/** Public endpoints that browser-based clients call directly: any origin, no credentials. */
const cors: RequestHandler = (req, res, next) => {
  res.set({
    'Access-Control-Allow-Origin': '*',
    'Access-Control-Allow-Methods': 'GET, POST, OPTIONS',
    'Access-Control-Allow-Headers': 'content-type, authorization',
  });
  if (req.method === 'OPTIONS') return void res.status(204).end();
  next();
};

const bodyOf = (req: Request): Record<string, unknown> =>
  req.body && typeof req.body === 'object' && !Array.isArray(req.body) ? (req.body as Record<string, unknown>) : {};

/** Keeps the string-valued fields only (a repeated form field arrives as an array and is dropped). */
function stringFields(body: Record<string, unknown>): Record<string, string> {
  return Object.fromEntries(Object.entries(body).filter((e): e is [string, string] => typeof e[1] === 'string'));
}

/** Answers errors in the RFC 6749 shape `{error, error_description}` instead of the API's `{error, code}`. */
function oauthRoute(fn: (req: Request, res: Response) => Promise<void>): RequestHandler {
  return (req: Request, res: Response, next: NextFunction) => {
    fn(req, res).catch((err: unknown) => {
      if (!(err instanceof AppError)) return next(err);
      if (err.status === 429 && typeof err.details?.retryAfter === 'number')
        res.set('Retry-After', String(err.details.retryAfter));
      const error = err.status === 429 ? 'slow_down' : err.code;
      res.status(err.status).set('Cache-Control', 'no-store').json({ error, error_description: err.message });
    });
  };
}
