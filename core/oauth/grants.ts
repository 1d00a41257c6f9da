import { and, desc, eq, gt, isNull, sql } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { AppError, notFound } from '../errors.js';
import type { Actor } from '../tenancy.js';

/** Why a grant stopped: the user unlinked it, the app revoked it, or a replay showed a token had leaked. */
export type RevokeReason = 'user' | 'revocation_endpoint' | 'code_replay' | 'refresh_reuse';

/** Linked apps of an account: list, revoke, and the check every OAuth-token request makes. */
export function createGrantStore(deps: { db: Db; cap?: number }) {
  const { db } = deps;
  const g = schema.oauthGrants;
  const cap = deps.cap ?? Number.MAX_SAFE_INTEGER;

  async function revoke(grantId: string, reason: RevokeReason): Promise<void> {
    await db
      .update(g)
      .set({ revokedAt: Date.now(), revokedReason: reason })
      .where(and(eq(g.id, grantId), isNull(g.revokedAt)));
  }

  return {
    revoke,

    /**
     * OAUTH_APPS_PER_ACCOUNT: before a code is issued, the account's linked apps plus its codes not yet
     * used (each becomes a linked app) must be under the cap; 403 oauth_apps_limit otherwise.
     */
    async assertRoom(userId: string): Promise<void> {
      const c = schema.oauthCodes;
      const [linked] = await db
        .select({ n: sql<string>`count(*)` })
        .from(g)
        .where(and(eq(g.userId, userId), isNull(g.revokedAt)));
      const [pending] = await db
        .select({ n: sql<string>`count(*)` })
        .from(c)
        .where(and(eq(c.userId, userId), isNull(c.usedAt), gt(c.expiresAt, Date.now())));
      if (Number(linked?.n ?? 0) + Number(pending?.n ?? 0) >= cap) {
        throw new AppError(
          403,
          'oauth_apps_limit',
          `This account has reached its cap of ${cap} linked apps; unlink one under Linked apps first`,
        );
      }
    },

    /** True while the grant stands; one primary-key read per request, so revocation works at once. */
    async isActive(grantId: string, userId: string): Promise<boolean> {
      const [row] = await db.select({ userId: g.userId, revokedAt: g.revokedAt }).from(g).where(eq(g.id, grantId));
      return !!row && row.userId === userId && row.revokedAt === null;
    },

    /** The apps linked to the account, newest first (revoked grants are gone from the list). */
    async list({ userId }: Actor) {
      const c = schema.oauthClients;
      const rows = await db
        .select({ grant: g, clientName: c.name, redirectUris: c.redirectUris })
        .from(g)
        .innerJoin(c, eq(c.id, g.clientId))
        .where(and(eq(g.userId, userId), isNull(g.revokedAt)))
        .orderBy(desc(g.createdAt));
      return rows.map(({ grant, clientName, redirectUris }) => ({
        id: grant.id,
        client_id: grant.clientId,
        client_name: clientName,
        redirect_hosts: [...new Set(redirectUris.map((u) => new URL(u).host))],
        scope: grant.scope,
        created_at: grant.createdAt,
        last_used_at: grant.lastUsedAt,
      }));
    },

    /** Unlinks one app of the account; its access and refresh tokens stop working at once. */
    async revokeForUser({ userId }: Actor, grantId: string) {
      const [row] = await db
        .update(g)
        .set({ revokedAt: Date.now(), revokedReason: 'user' })
        .where(and(eq(g.id, grantId), eq(g.userId, userId), isNull(g.revokedAt)))
        .returning({ id: g.id });
      if (!row) throw notFound('No linked app with this id', 'grant_not_found');
      return { ok: true as const };
    },
  };
}
export type GrantStore = ReturnType<typeof createGrantStore>;
