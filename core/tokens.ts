import { errors, jwtVerify, SignJWT } from 'jose';
import { deriveKey } from './secrets.js';
import { unauthorized } from './errors.js';

/** Session tokens (sign-in) and OAuth access tokens: HS256 JWTs keyed from SECRET_KEY. */
export type TokenKind = 'session' | 'oauth';
/**
 * `grantId` (claim `gid`) ties an OAuth access token to its grant, so revoking the grant stops it at once;
 * `version` is the account's session version at issue time: bumping it revokes every older session token;
 * `audience` (claim `aud`) is the resource an OAuth access token is for (RFC 8707, core/oauth/resource.ts).
 */
export type TokenClaims = {
  userId: string;
  kind: TokenKind;
  clientId?: string;
  grantId?: string;
  version?: number;
  audience?: string;
};

const ISSUER = 'svc-mail';
export const SESSION_TTL_SECONDS = 7 * 24 * 3600;

export function createTokenService(secretKey: string) {
  const key = deriveKey(secretKey, 'jwt-v1');
  return {
    async issue(claims: TokenClaims, ttlSeconds = SESSION_TTL_SECONDS): Promise<string> {
      const jwt = new SignJWT({
        knd: claims.kind,
        ver: claims.version ?? 0,
        ...(claims.clientId ? { cid: claims.clientId } : {}),
        ...(claims.grantId ? { gid: claims.grantId } : {}),
      })
        .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
        .setSubject(claims.userId)
        .setIssuer(ISSUER)
        .setIssuedAt()
        .setExpirationTime(Math.floor(Date.now() / 1000) + ttlSeconds);
      if (claims.audience) jwt.setAudience(claims.audience);
      return jwt.sign(key);
    },
    async verify(token: string): Promise<TokenClaims> {
      try {
        const { payload } = await jwtVerify(token, key, { issuer: ISSUER, algorithms: ['HS256'] });
        const kind = payload.knd;
        if ((kind !== 'session' && kind !== 'oauth') || typeof payload.sub !== 'string')
          throw unauthorized('Invalid token');
        const version = typeof payload.ver === 'number' ? payload.ver : 0;
        return {
          userId: payload.sub,
          kind,
          version,
          ...(typeof payload.cid === 'string' ? { clientId: payload.cid } : {}),
          ...(typeof payload.gid === 'string' ? { grantId: payload.gid } : {}),
          ...(typeof payload.aud === 'string' ? { audience: payload.aud } : {}),
        };
      } catch (err) {
        if (err instanceof errors.JWTExpired) throw unauthorized('Token expired', 'token_expired');
        if (err instanceof errors.JOSEError) throw unauthorized('Invalid token');
        throw err;
      }
    },
  };
}
export type TokenService = ReturnType<typeof createTokenService>;

/** Does this bearer string look like a JWT (three base64url parts)? */
export function looksLikeJwt(token: string): boolean {
  return /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/.test(token);
}
