import { createHash } from 'node:crypto';
import { and, eq, gt, isNull, lt } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { newId, randomToken } from '../ids.js';
import { credentialHash, safeEqual } from '../secrets.js';
import type { TokenService } from '../tokens.js';
import type { AuthorizationRequest } from './authorize-request.js';
import { invalidGrant, invalidRequest, oauthError } from './errors.js';
import type { GrantStore } from './grants.js';
import type { ResourceRules } from './resource.js';

export const CODE_TTL_MS = 60_000;
export const REFRESH_TTL_MS = 30 * 24 * 3600_000;
const VERIFIER = /^[A-Za-z0-9._~-]{43,128}$/;

export type TokenResponse = {
  access_token: string;
  token_type: 'Bearer';
  expires_in: number;
  refresh_token: string;
  scope: string;
};

/** The token endpoint's rules: single-use codes with PKCE, rotating refresh tokens with reuse detection. */
export function createTokenExchange(deps: {
  db: Db;
  tokens: TokenService;
  grants: GrantStore;
  accessTtlSeconds: number;
  resources: ResourceRules;
}) {
  const { db } = deps;
  const codes = schema.oauthCodes;
  const refreshTokens = schema.oauthRefreshTokens;

  /** `audience`: the resource the request named (RFC 8707), checked before anything is written. */
  async function tokensFor(
    grant: { id: string; userId: string; clientId: string; scope: string },
    audience: string,
    tx: Db = db,
  ): Promise<TokenResponse> {
    const refresh = `svc_rt_${randomToken(32)}`;
    const now = Date.now();
    await tx.insert(refreshTokens).values({
      id: newId('ort'),
      tokenHash: credentialHash(refresh),
      grantId: grant.id,
      expiresAt: now + REFRESH_TTL_MS,
      createdAt: now,
    });
    const access = await deps.tokens.issue(
      { userId: grant.userId, kind: 'oauth', clientId: grant.clientId, grantId: grant.id, audience },
      deps.accessTtlSeconds,
    );
    return {
      access_token: access,
      token_type: 'Bearer',
      expires_in: deps.accessTtlSeconds,
      refresh_token: refresh,
      scope: grant.scope,
    };
  }

  return {
    /** Mints a single-use authorization code for an approved request; only its hash is kept. */
    async issueCode(req: AuthorizationRequest, userId: string): Promise<string> {
      await deps.grants.assertRoom(userId);
      const code = randomToken(32);
      const now = Date.now();
      // Approvals are rare: each one also clears codes that expired a day ago (replays of those are moot).
      await db.delete(codes).where(lt(codes.expiresAt, now - 24 * 3600_000));
      await db.insert(codes).values({
        id: newId('ocd'),
        codeHash: credentialHash(code),
        clientId: req.client.id,
        userId,
        redirectUri: req.redirectUri,
        codeChallenge: req.codeChallenge,
        scope: req.scope,
        expiresAt: now + CODE_TTL_MS,
        createdAt: now,
      });
      return code;
    },

    /**
     * authorization_code grant. The code is burnt by the first attempt, right or wrong; a second use of a
     * code that issued tokens revokes that grant (RFC 6749 §4.1.2: the code may have leaked).
     */
    async exchangeCode(p: {
      code?: string;
      redirect_uri?: string;
      client_id?: string;
      code_verifier?: string;
      resource?: string;
    }): Promise<TokenResponse> {
      if (!p.code) throw invalidRequest('code is required');
      if (!p.client_id) throw invalidRequest('client_id is required');
      if (!p.redirect_uri) throw invalidRequest('redirect_uri is required');
      if (!p.code_verifier) throw invalidRequest('code_verifier is required: PKCE is mandatory');
      const audience = deps.resources.audienceFor(p.resource);
      const grantId = newId('grt');
      return db
        .transaction(async (tx) => {
          const now = Date.now();
          const [row] = await tx
            .update(codes)
            .set({ usedAt: now, grantId })
            .where(and(eq(codes.codeHash, credentialHash(p.code!)), isNull(codes.usedAt)))
            .returning();
          if (!row) {
            const [used] = await tx
              .select()
              .from(codes)
              .where(eq(codes.codeHash, credentialHash(p.code!)));
            if (used?.grantId) await deps.grants.revoke(used.grantId, 'code_replay');
            throw invalidGrant(
              used
                ? 'This authorization code was already used; the tokens it issued are revoked'
                : 'Unknown authorization code',
            );
          }
          if (row.expiresAt <= now) throw invalidGrant('The authorization code expired');
          if (row.clientId !== p.client_id) throw invalidGrant('The authorization code was issued to another client');
          if (row.redirectUri !== p.redirect_uri)
            throw invalidGrant('redirect_uri does not match the one used at authorization');
          if (!VERIFIER.test(p.code_verifier!) || !safeEqual(s256(p.code_verifier!), row.codeChallenge)) {
            throw invalidGrant('code_verifier does not match the code_challenge');
          }
          const grant = { id: grantId, userId: row.userId, clientId: row.clientId, scope: row.scope };
          await tx.insert(schema.oauthGrants).values({ ...grant, createdAt: now, lastUsedAt: now });
          return tokensFor(grant, audience, tx);
        })
        .catch(async (err) => {
          // A failed attempt still burns the code (outside the rolled-back transaction).
          await db
            .update(codes)
            .set({ usedAt: Date.now() })
            .where(and(eq(codes.codeHash, credentialHash(p.code!)), isNull(codes.usedAt)));
          throw err;
        });
    },

    /** refresh_token grant: single-use and rotated; a reused token revokes its whole grant (OAuth 2.1 §4.3.1). */
    async refresh(p: { refresh_token?: string; client_id?: string; resource?: string }): Promise<TokenResponse> {
      if (!p.refresh_token) throw invalidRequest('refresh_token is required');
      const audience = deps.resources.audienceFor(p.resource);
      const hash = credentialHash(p.refresh_token);
      const now = Date.now();
      const [row] = await db
        .update(refreshTokens)
        .set({ usedAt: now })
        .where(and(eq(refreshTokens.tokenHash, hash), isNull(refreshTokens.usedAt), gt(refreshTokens.expiresAt, now)))
        .returning();
      if (!row) {
        const [used] = await db.select().from(refreshTokens).where(eq(refreshTokens.tokenHash, hash));
        if (used?.usedAt) {
          await deps.grants.revoke(used.grantId, 'refresh_reuse');
          throw invalidGrant('This refresh token was already used; every token of this grant is now revoked');
        }
        throw invalidGrant(used ? 'The refresh token expired' : 'Unknown refresh token');
      }
      const [grant] = await db.select().from(schema.oauthGrants).where(eq(schema.oauthGrants.id, row.grantId));
      if (!grant || grant.revokedAt !== null) throw invalidGrant('This grant was revoked');
      if (p.client_id !== undefined && p.client_id !== grant.clientId) {
        await deps.grants.revoke(grant.id, 'refresh_reuse');
        throw invalidGrant('The refresh token was issued to another client');
      }
      await db.update(schema.oauthGrants).set({ lastUsedAt: now }).where(eq(schema.oauthGrants.id, grant.id));
      // Rotated-out tokens are kept for reuse detection only while they could still have been valid.
      await db.delete(refreshTokens).where(and(eq(refreshTokens.grantId, grant.id), lt(refreshTokens.expiresAt, now)));
      return tokensFor(grant, audience);
    },

    /**
     * RFC 7009: revokes the grant behind a refresh or access token, so every token of it stops. Unknown
     * or invalid tokens are not an error; a token of another client (when `client_id` is sent) is left alone.
     */
    async revokeToken(p: { token?: string; client_id?: string }): Promise<void> {
      if (!p.token) throw invalidRequest('token is required');
      const grantId = await grantOf(p.token);
      if (!grantId) return;
      const [grant] = await db.select().from(schema.oauthGrants).where(eq(schema.oauthGrants.id, grantId));
      if (!grant || (p.client_id !== undefined && p.client_id !== grant.clientId)) return;
      await deps.grants.revoke(grant.id, 'revocation_endpoint');
    },
  };

  async function grantOf(token: string): Promise<string | undefined> {
    if (token.startsWith('svc_rt_')) {
      const [row] = await db
        .select({ grantId: refreshTokens.grantId })
        .from(refreshTokens)
        .where(eq(refreshTokens.tokenHash, credentialHash(token)));
      return row?.grantId;
    }
    const claims = await deps.tokens.verify(token).catch(() => undefined);
    return claims?.kind === 'oauth' ? claims.grantId : undefined;
  }
}
export type TokenExchange = ReturnType<typeof createTokenExchange>;

/** PKCE S256: base64url(SHA-256(verifier)) (RFC 7636 §4.2). */
export const s256 = (verifier: string) => createHash('sha256').update(verifier).digest('base64url');

/** The token endpoint's answer to a grant type other than the two it serves. */
export const unsupportedGrant = (type: string | undefined) =>
  oauthError(
    'unsupported_grant_type',
    type ? `grant_type ${type} is not supported (use authorization_code or refresh_token)` : 'grant_type is required',
  );
