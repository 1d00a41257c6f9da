import { and, asc, eq } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { badRequest, notFound } from '../errors.js';
import type { DomainRow } from '../domains/dto.js';
import type { ProviderRegistry } from '../domains/providers.js';
import { providerTypeOf, type EgressConfig } from '../egress/config.js';
import type { EgressRouter } from '../egress/router.js';
import { suspensionsBySource, type AssignStream } from '../egress/suspensions.js';

/**
 * The operator's egress view and assignments (GET /api/operator/egress, POST /api/operator/egress/assign):
 * sources (never a relay password), pools, the streams' pools, the accounts and domains given a pool.
 * An account's assignment is forgotten by this process's router at once; other processes see it within
 * ASSIGNMENT_CACHE_MS (30 s).
 */
export function createEgressOperator(deps: {
  db: Db;
  egress: EgressConfig;
  providers: ProviderRegistry;
  router: EgressRouter;
  /** Writes a hosted domain's records again (its provider's records changed). */
  republish(row: DomainRow): Promise<void>;
}) {
  const { db, egress } = deps;
  const d = schema.domains;
  const a = schema.egressAssignments;
  const knownPool = (pool: string) => {
    if (!egress.pools.has(pool))
      throw badRequest(`Unknown pool "${pool}" (pools: ${[...egress.pools.keys()].join(', ')})`, 'unknown_pool');
  };

  return {
    async view() {
      const suspended = await suspensionsBySource(db);
      const assignments = await db
        .select({ userId: a.userId, email: schema.users.email, stream: a.stream, pool: a.pool })
        .from(a)
        .innerJoin(schema.users, eq(schema.users.id, a.userId))
        .orderBy(asc(schema.users.email), asc(a.stream))
        .limit(10_000);
      const pinned = await db
        .select({ id: d.id, domain: d.domain, userId: d.userId, pool: d.emailProviderId })
        .from(d)
        .where(eq(d.egressPinned, true))
        .orderBy(asc(d.domain))
        .limit(10_000);
      return {
        file: egress.file,
        sources: [...egress.sources.values()].map((s) => ({
          name: s.name,
          bind_address: s.bindAddress ?? null,
          ehlo_name: s.ehloName ?? null,
          relay: s.relay ? { host: s.relay.host, port: s.relay.port, security: s.relay.security } : null,
          suspended: suspended.get(s.name) ?? [],
        })),
        pools: [...egress.pools.values()].map((p) => ({
          name: p.name,
          label: p.label,
          type: providerTypeOf(egress, p.name),
          sources: p.sources.map((m) => ({ name: m.source, weight: m.weight })),
        })),
        streams: { ...egress.streams },
        assignments: assignments.map((r) => ({ account_id: r.userId, email: r.email, stream: r.stream, pool: r.pool })),
        domains: pinned.map((r) => ({ id: r.id, domain: r.domain, account_id: r.userId, pool: r.pool })),
      };
    },

    /** Gives an account's mail (all of it, or one stream) a pool; `null` removes the assignment. */
    async assignAccount(userId: string, stream: AssignStream, pool: string | null) {
      if (pool !== null) knownPool(pool);
      const [user] = await db.select({ id: schema.users.id }).from(schema.users).where(eq(schema.users.id, userId));
      if (!user) throw notFound('Account not found');
      if (pool === null) await db.delete(a).where(and(eq(a.userId, userId), eq(a.stream, stream)));
      else
        await db
          .insert(a)
          .values({ userId, stream, pool, updatedAt: Date.now() })
          .onConflictDoUpdate({ target: [a.userId, a.stream], set: { pool, updatedAt: Date.now() } });
      deps.router.forget(userId);
      return { ok: true as const, account_id: userId, stream, pool };
    },

    /** Pins a domain to a pool (its provider); `null` returns it to the platform default, unpinned. */
    async assignDomain(domainId: string, pool: string | null) {
      if (pool !== null) knownPool(pool);
      const provider = pool === null ? deps.providers.default : deps.providers.byId(pool)!;
      const [row] = await db
        .update(d)
        .set({
          emailProviderId: provider.id,
          provider: provider.type,
          egressPinned: pool !== null,
          updatedAt: Date.now(),
        })
        .where(eq(d.id, domainId))
        .returning();
      if (!row) throw notFound('Domain not found');
      if (row.hosted) await deps.republish(row);
      return {
        ok: true as const,
        domain_id: row.id,
        pool: provider.id,
        provider: provider.type,
        pinned: pool !== null,
      };
    },
  };
}
export type EgressOperator = ReturnType<typeof createEgressOperator>;
