import type { Express, NextFunction, Request, RequestHandler, Response } from 'express';
import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import type { UserRow } from '../../core/accounts.js';
import { AppError } from '../../core/errors.js';
import type { Core } from '../../core/index.js';
import { redirectWith, type AuthorizationRequest, type AuthorizeCheck } from '../../core/oauth/authorize-request.js';
import { holdingsHtml, keptFrom, originHtml, revokeChoices } from '../account-page.js';
import { emailField } from '../contract.js';
import { createBrowserSession } from './browser-session.js';
import {
  appHeader,
  consentSection,
  errorBody,
  noticeHtml,
  redeemSection,
  renderPage,
  signinSections,
  verifySection,
  type FormContext,
  type Notice,
} from './page.js';

const REQUEST_FIELDS = [
  'response_type',
  'client_id',
  'redirect_uri',
  'state',
  'code_challenge',
  'code_challenge_method',
  'scope',
];
const password = z.string().min(8, 'The password must be at least 8 characters').max(200);

/**
 * The browser step of account linking: a server-rendered page where the user signs in (password or
 * mailed link) or creates an account, then approves or denies. Every POST re-checks the whole request.
 */
export function mountAuthorize(app: Express, core: Pick<Core, 'accounts' | 'config' | 'oauth' | 'tokens'>): void {
  const { publicUrl } = core.config;
  const session = createBrowserSession({
    tokens: core.tokens,
    accounts: core.accounts,
    secretKey: core.config.secretKey,
    secure: publicUrl.startsWith('https:'),
  });
  type Ctx = FormContext & { request: AuthorizationRequest; self: string };

  const contextFor = (
    req: Request,
    res: Response,
    request: AuthorizationRequest,
    input: Record<string, unknown>,
  ): Ctx => {
    const fields = Object.fromEntries(
      REQUEST_FIELDS.filter((k) => typeof input[k] === 'string' && input[k] !== '').map((k) => [k, input[k] as string]),
    );
    return {
      fields,
      request,
      csrf: session.csrfFor(req, res, binding(request)),
      self: `/oauth/authorize?${new URLSearchParams(fields)}`,
    };
  };
  /** A mailed link that brings the user back to this same authorization request. */
  const mailLink = (ctx: Ctx) => (token: string) =>
    `${publicUrl}${ctx.self}&${new URLSearchParams({ login_token: token })}`;
  const backToApp = (res: Response, request: AuthorizationRequest, params: Record<string, string | undefined>) =>
    void res.redirect(303, redirectWith(request.redirectUri, { ...params, state: request.state, iss: publicUrl }));

  const show = (res: Response, ctx: Ctx | undefined, status: number, body: string, notice?: Notice) => {
    const nonce = randomBytes(16).toString('base64');
    const back = ctx ? ` ${new URL(ctx.request.redirectUri).origin}` : '';
    res
      .status(status)
      .set({
        'Content-Security-Policy': `default-src 'none'; style-src 'nonce-${nonce}'; form-action 'self'${back}; frame-ancestors 'none'; base-uri 'none'`,
        'X-Frame-Options': 'DENY',
        'Cache-Control': 'no-store',
        'Referrer-Policy': 'no-referrer',
      })
      .type('html');
    if (!ctx) return void res.send(renderPage('Cannot link this app', body, nonce));
    const header = `<h1>Link an app to your account</h1>${appHeader(ctx.request.client.name, new URL(ctx.request.redirectUri).host)}`;
    res.send(renderPage('Link an app to your account', `${header}${noticeHtml(notice)}${body}`, nonce));
  };
  const currentUser = (req: Request): Promise<UserRow | undefined> => session.user(req);
  const home = (ctx: Ctx, user: UserRow | undefined, email?: string) =>
    !user
      ? signinSections(ctx, email)
      : user.emailVerified
        ? consentSection(ctx, user.email)
        : verifySection(ctx, user.email);
  /** Errors with an untrusted redirect URI are shown; with a trusted one they go back to the app (RFC 6749 §4.1.2.1). */
  const refuse = (res: Response, check: Exclude<AuthorizeCheck, { kind: 'ok' }>) =>
    check.kind === 'page'
      ? show(res, undefined, 400, errorBody(check.message))
      : void res.redirect(
          303,
          redirectWith(check.redirectUri, {
            error: check.error,
            error_description: check.description,
            state: check.state,
            iss: publicUrl,
          }),
        );

  app.get(
    '/oauth/authorize',
    page(async (req, res) => {
      const input = req.query as Record<string, unknown>;
      const check = await core.oauth.checkAuthorizationRequest(input);
      if (check.kind !== 'ok') return refuse(res, check);
      const ctx = contextFor(req, res, check.request, input);
      if (typeof input.login_token === 'string' && input.login_token) {
        const link = await core.accounts.describeLink({ token: input.login_token }).catch(() => undefined);
        const unverified = link && !link.emailVerified ? `${originHtml(link)}${holdingsHtml(link)}` : undefined;
        return show(
          res,
          ctx,
          200,
          redeemSection(ctx, input.login_token, unverified, link ? revokeChoices(link.credentials) : ''),
        );
      }
      show(res, ctx, 200, home(ctx, await currentUser(req)));
    }),
  );

  app.post(
    '/oauth/authorize',
    page(async (req, res) => {
      const input = (req.body && typeof req.body === 'object' ? req.body : {}) as Record<string, unknown>;
      const check = await core.oauth.checkAuthorizationRequest(input);
      if (check.kind !== 'ok') return refuse(res, check);
      const { request } = check;
      if (!session.checkCsrf(req, binding(request), input.csrf)) {
        return show(
          res,
          undefined,
          403,
          errorBody('This form did not come from this page, or it expired. Nothing was approved.'),
        );
      }
      const ctx = contextFor(req, res, request, input);
      const str = (k: string) => (typeof input[k] === 'string' ? (input[k] as string) : '');
      const fail = async (err: unknown, status = 400) => {
        if (!(err instanceof AppError)) throw err;
        const user = await currentUser(req);
        show(res, ctx, err.status === 429 ? 429 : status, home(ctx, user, str('email')), {
          kind: 'error',
          text: err.message,
        });
      };
      try {
        switch (str('action')) {
          case 'deny':
            return backToApp(res, request, {
              error: 'access_denied',
              error_description: 'The user denied the request',
            });
          case 'logout': {
            // Signing out here is signing out as on the dashboard: every session of the account ends (its version moves).
            const user = await currentUser(req);
            if (user) await core.accounts.signOutEverywhere(user.id);
            session.signOut(res);
            return void res.redirect(303, ctx.self);
          }
          case 'login': {
            const { user } = await core.accounts.login(
              { email: emailField.parse(str('email')), password: str('password') },
              req.ip ?? '',
            );
            await session.signIn(res, user.id);
            return void res.redirect(303, ctx.self);
          }
          case 'signup': {
            const creds = { email: emailField.parse(str('email')), password: password.parse(str('password')) };
            const { user } = await core.accounts.signup(creds, req.ip ?? '', mailLink(ctx), {
              clientId: request.client.id,
            });
            await session.signIn(res, user.id);
            return void res.redirect(303, ctx.self);
          }
          case 'link': {
            const email = emailField.parse(str('email'));
            await core.accounts.requestSigninLink({ email }, mailLink(ctx));
            const text = `If ${email} has an account, a sign-in link is on its way. Open it in this browser to come back here.`;
            return show(res, ctx, 200, home(ctx, await currentUser(req), email), { kind: 'info', text });
          }
          case 'redeem': {
            const user = await core.accounts.redeemMailedLink({ token: str('login_token'), keep: keptFrom(input) });
            await session.signIn(res, user.id);
            return void res.redirect(303, ctx.self);
          }
          case 'disown': {
            const gone = await core.accounts.disown({ token: str('login_token') });
            session.signOut(res);
            const text = `The account for ${gone.email} and everything it held are deleted.`;
            return show(res, ctx, 200, home(ctx, undefined), { kind: 'info', text });
          }
          case 'approve': {
            const user = await currentUser(req);
            if (!user) return show(res, ctx, 401, home(ctx, undefined), { kind: 'error', text: 'Sign in first.' });
            if (!user.emailVerified)
              return show(res, ctx, 403, home(ctx, user), {
                kind: 'error',
                text: 'Verify your email address before linking an app.',
              });
            const code = await core.oauth.exchange.issueCode(request, user.id);
            return backToApp(res, request, { code });
          }
          default:
            return show(res, ctx, 400, home(ctx, await currentUser(req)), { kind: 'error', text: 'Unknown action.' });
        }
      } catch (err) {
        if (err instanceof z.ZodError)
          return fail(new AppError(400, 'validation_error', err.issues.map((i) => i.message).join('; ')));
        return fail(err, err instanceof AppError && err.status === 401 ? 401 : 400);
      }
    }),
  );
}

/** What the CSRF token is bound to: the parts of the request an attacker would want to swap. */
const binding = (r: AuthorizationRequest) =>
  JSON.stringify([r.client.id, r.redirectUri, r.codeChallenge, r.state ?? '', r.scope]);

function page(fn: (req: Request, res: Response) => Promise<void>): RequestHandler {
  return (req: Request, res: Response, next: NextFunction) => void fn(req, res).catch(next);
}
