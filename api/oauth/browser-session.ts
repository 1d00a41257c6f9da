import type { Request, Response } from 'express';
import type { AccountService, UserRow } from '../../core/accounts.js';
import { randomToken } from '../../core/ids.js';
import { deriveKey, hmacHex, safeEqual } from '../../core/secrets.js';
import type { TokenService } from '../../core/tokens.js';

const SESSION_COOKIE = 'svc_oauth_session';
const CSRF_COOKIE = 'svc_oauth_csrf';
const SESSION_TTL_SECONDS = 3600;

/** Reads one cookie from the request without a cookie-parser dependency. */
function readCookie(req: Request, name: string): string | undefined {
  for (const part of (req.get('cookie') ?? '').split(';')) {
    const i = part.indexOf('=');
    if (i > 0 && part.slice(0, i).trim() === name) return decodeURIComponent(part.slice(i + 1).trim());
  }
  return undefined;
}

/**
 * The browser side of /oauth/authorize: a short session cookie for the signed-in account, and a CSRF
 * token bound to a random cookie and to the authorization request, so a form from another site (or for
 * another request) is refused. The cookie carries the account's session version like every session
 * token: signing out (anywhere) or changing the password bumps it, and the cookie stops signing in.
 */
export function createBrowserSession(deps: {
  tokens: TokenService;
  accounts: Pick<AccountService, 'getUser'>;
  secretKey: string;
  secure: boolean;
}) {
  const csrfKey = deriveKey(deps.secretKey, 'oauth-csrf-v1');
  const cookieOpts = { httpOnly: true, sameSite: 'lax' as const, secure: deps.secure, path: '/oauth' };

  return {
    /** The signed-in account, or undefined (no cookie; expired, forged, or older than the account's session version). */
    async user(req: Request): Promise<UserRow | undefined> {
      const token = readCookie(req, SESSION_COOKIE);
      if (!token) return undefined;
      const claims = await deps.tokens.verify(token).catch(() => undefined);
      if (claims?.kind !== 'session') return undefined;
      const user = await deps.accounts.getUser(claims.userId);
      return user && (claims.version ?? 0) === user.sessionVersion ? user : undefined;
    },

    async signIn(res: Response, userId: string): Promise<void> {
      const user = await deps.accounts.getUser(userId);
      if (!user) return;
      const token = await deps.tokens.issue(
        { userId, kind: 'session', version: user.sessionVersion },
        SESSION_TTL_SECONDS,
      );
      res.cookie(SESSION_COOKIE, token, { ...cookieOpts, maxAge: SESSION_TTL_SECONDS * 1000 });
    },

    signOut(res: Response): void {
      res.clearCookie(SESSION_COOKIE, cookieOpts);
    },

    /** The CSRF token for this browser and request; sets the browser's random cookie when it has none. */
    csrfFor(req: Request, res: Response, binding: string): string {
      let nonce = readCookie(req, CSRF_COOKIE);
      if (!nonce || !/^[A-Za-z0-9_-]{32,}$/.test(nonce)) {
        nonce = randomToken(32);
        res.cookie(CSRF_COOKIE, nonce, cookieOpts);
      }
      return hmacHex(csrfKey, `${nonce}\n${binding}`);
    },

    /** True when the posted token was made for this browser's cookie and this very request. */
    checkCsrf(req: Request, binding: string, posted: unknown): boolean {
      const nonce = readCookie(req, CSRF_COOKIE);
      if (!nonce || typeof posted !== 'string') return false;
      return safeEqual(hmacHex(csrfKey, `${nonce}\n${binding}`), posted);
    },
  };
}
export type BrowserSession = ReturnType<typeof createBrowserSession>;
