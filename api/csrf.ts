import type { Request, Response } from 'express';
import { randomToken } from '../core/ids.js';
import { deriveKey, hmacHex, safeEqual } from '../core/secrets.js';

/** Reads one cookie from the request without a cookie-parser dependency. */
export function readCookie(req: Request, name: string): string | undefined {
  for (const part of (req.get('cookie') ?? '').split(';')) {
    const i = part.indexOf('=');
    if (i > 0 && part.slice(0, i).trim() === name) return decodeURIComponent(part.slice(i + 1).trim());
  }
  return undefined;
}

/**
 * Double-submit CSRF tokens for server-rendered forms: a random cookie for the browser, and a form token
 * that is an HMAC of that cookie and of what the form acts on, so a form made elsewhere (or for another
 * link) is refused. The cookie is SameSite=Strict and limited to `path`.
 */
export function createCsrf(opts: {
  secretKey: string;
  purpose: string;
  cookie: string;
  path: string;
  secure: boolean;
}) {
  const key = deriveKey(opts.secretKey, opts.purpose);
  const cookieOpts = { httpOnly: true, sameSite: 'strict' as const, secure: opts.secure, path: opts.path };
  return {
    /** The form token for this browser and `binding`; sets the browser's random cookie when it has none. */
    tokenFor(req: Request, res: Response, binding: string): string {
      let nonce = readCookie(req, opts.cookie);
      if (!nonce || !/^[A-Za-z0-9_-]{32,64}$/.test(nonce)) {
        nonce = randomToken(32);
        res.cookie(opts.cookie, nonce, cookieOpts);
      }
      return hmacHex(key, `${nonce}\n${binding}`);
    },
    /** True when the posted token was made for this browser's cookie and this `binding`. */
    check(req: Request, binding: string, posted: unknown): boolean {
      const nonce = readCookie(req, opts.cookie);
      if (!nonce || typeof posted !== 'string') return false;
      return safeEqual(hmacHex(key, `${nonce}\n${binding}`), posted);
    },
  };
}
export type Csrf = ReturnType<typeof createCsrf>;
