import { randomBytes } from 'node:crypto';
import type { Express, NextFunction, Request, RequestHandler, Response } from 'express';
import type { LinkDetails } from '../core/accounts.js';
import { AppError } from '../core/errors.js';
import type { Core } from '../core/index.js';
import { keptFrom, revokeChoices, unverifiedNotice, verifyPageBody } from './account-page.js';
import { createCsrf } from './csrf.js';
import { esc, noticeHtml, renderPage } from './oauth/page.js';

const str = (v: unknown) => (typeof v === 'string' ? v : '');

/**
 * The pages mailed links open: verify (how the account was made, what it holds, "yes, mine" or "I did not
 * ask for this"), sign in, and password reset. A GET only shows; only a POST from the page, carrying the
 * link's token and a CSRF token bound to this browser and that link, changes anything (mail scanners open links).
 */
export function mountPages(app: Express, core: Pick<Core, 'accounts' | 'config'>): void {
  const csrf = createCsrf({
    secretKey: core.config.secretKey,
    purpose: 'auth-pages-csrf-v1',
    cookie: 'svc_auth_csrf',
    path: '/auth',
    secure: core.config.publicUrl.startsWith('https:'),
  });
  const show = (res: Response, status: number, title: string, body: string) => {
    const nonce = randomBytes(16).toString('base64');
    res
      .status(status)
      .set({
        'Content-Security-Policy': `default-src 'none'; style-src 'nonce-${nonce}'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'`,
        'Cache-Control': 'no-store',
        'Referrer-Policy': 'no-referrer',
        'X-Frame-Options': 'DENY',
      })
      .type('html')
      .send(renderPage(title, body, nonce));
  };
  const invalid = (res: Response, err: unknown) => {
    if (!(err instanceof AppError)) throw err;
    show(
      res,
      err.status,
      'This link cannot be used',
      `<h1>This link cannot be used</h1>${noticeHtml({ kind: 'error', text: err.message })}
<p>Ask for a new one from the app or the dashboard.</p>`,
    );
  };
  /** The link's details, or an error page already sent. */
  const details = async (res: Response, token: string): Promise<LinkDetails | undefined> => {
    try {
      if (!token) throw new AppError(400, 'validation_error', 'This link has no token: open it from your mail again');
      return await core.accounts.describeLink({ token });
    } catch (err) {
      invalid(res, err);
      return undefined;
    }
  };

  // Links mailed before the page moved keep working: they land on the page, which changes nothing by itself.
  app.get('/api/auth/verify', (req, res) =>
    res.redirect(303, `/auth/verify?${new URLSearchParams({ token: str(req.query.token) })}`),
  );

  app.get(
    '/auth/verify',
    page(async (req, res) => {
      const token = str(req.query.token);
      const d = await details(res, token);
      if (d) show(res, 200, 'Is this account yours?', verifyPageBody(d, token, csrf.tokenFor(req, res, token)));
    }),
  );

  app.post(
    '/auth/verify',
    page(async (req, res) => {
      const body = (req.body ?? {}) as Record<string, unknown>;
      const token = str(body.token);
      if (!csrf.check(req, token, body.csrf)) {
        return show(
          res,
          403,
          'Nothing was changed',
          '<h1>Nothing was changed</h1><p>This form did not come from the page of your link, or it expired. Open the link from your mail again.</p>',
        );
      }
      try {
        if (str(body.action) === 'disown') {
          const r = await core.accounts.disown({ token });
          return show(
            res,
            200,
            'Account deleted',
            `<h1>The account is deleted</h1><p>The account for <strong>${esc(r.email)}</strong> and everything it held are gone: its keys, sessions, app passwords, routes and linked apps no longer work.</p>`,
          );
        }
        const r = await core.accounts.verifyEmail({ token });
        show(
          res,
          200,
          'Address verified',
          `<h1>Your address is verified</h1><p><strong>${esc(r.email)}</strong> is confirmed. Every key and password of the account keeps working, and it can send now.</p>`,
        );
      } catch (err) {
        invalid(res, err);
      }
    }),
  );

  app.get(
    '/auth/signin',
    page(async (req, res) => {
      const token = str(req.query.token);
      const d = await details(res, token);
      if (!d) return;
      const form = csrf.tokenFor(req, res, token);
      show(
        res,
        200,
        'Sign in',
        `<h1>Sign in</h1>${d.emailVerified ? '' : unverifiedNotice(d, token, form)}
<form method="post" action="/auth/signin" aria-label="Sign in"><input type="hidden" name="token" value="${esc(token)}"><input type="hidden" name="csrf" value="${esc(form)}">
<p>Sign in as <strong>${esc(d.email)}</strong> with this one-time link.</p>${revokeChoices(d.credentials)}<button type="submit" class="primary">Sign in</button></form>`,
      );
    }),
  );

  app.post(
    '/auth/signin',
    page(async (req, res) => {
      const body = (req.body ?? {}) as Record<string, unknown>;
      const token = str(body.token);
      if (!csrf.check(req, token, body.csrf))
        return show(
          res,
          403,
          'Nothing was changed',
          '<h1>Nothing was changed</h1><p>Open the link from your mail again.</p>',
        );
      try {
        const s = await core.accounts.signin({ token, keep: keptFrom(body) });
        show(
          res,
          200,
          'Signed in',
          `<h1>Signed in</h1><p>Signed in as <strong>${esc(s.user.email)}</strong>. Session token (send it as <code>Authorization: Bearer …</code>):</p>
<p class="host">${esc(s.token)}</p>`,
        );
      } catch (err) {
        invalid(res, err);
      }
    }),
  );

  app.get(
    '/auth/reset',
    page(async (req, res) => {
      const token = str(req.query.token);
      const d = await details(res, token);
      if (!d) return;
      const form = csrf.tokenFor(req, res, token);
      show(
        res,
        200,
        'Choose a new password',
        `<h1>Choose a new password</h1>${d.emailVerified ? '' : unverifiedNotice(d, token, form)}
<form method="post" action="/auth/reset" aria-label="Set password"><input type="hidden" name="token" value="${esc(token)}"><input type="hidden" name="csrf" value="${esc(form)}">
<label for="pw">New password for ${esc(d.email)}</label><input id="pw" name="password" type="password" minlength="8" autocomplete="new-password" required>
${revokeChoices(d.credentials)}<button type="submit" class="primary">Set password</button></form>`,
      );
    }),
  );

  app.post(
    '/auth/reset',
    page(async (req, res) => {
      const body = (req.body ?? {}) as Record<string, unknown>;
      const token = str(body.token);
      if (!csrf.check(req, token, body.csrf))
        return show(
          res,
          403,
          'Nothing was changed',
          '<h1>Nothing was changed</h1><p>Open the link from your mail again.</p>',
        );
      try {
        const password = str(body.password);
        if (password.length < 8 || password.length > 200)
          throw new AppError(400, 'validation_error', 'The password must be 8 to 200 characters; open the link again');
        const s = await core.accounts.resetPassword({ token, password, keep: keptFrom(body) });
        show(
          res,
          200,
          'Password set',
          `<h1>Password set</h1><p>The password of <strong>${esc(s.user.email)}</strong> is changed; other sessions were signed out.</p>`,
        );
      } catch (err) {
        invalid(res, err);
      }
    }),
  );
}

function page(fn: (req: Request, res: Response) => Promise<void>): RequestHandler {
  return (req: Request, res: Response, next: NextFunction) => void fn(req, res).catch(next);
}
