import { and, desc, eq } from 'drizzle-orm';
import type { Db } from '../db/index.js';
import { schema } from '../db/index.js';
import type { DomainService } from './domains/service.js';
import type { Actor } from './tenancy.js';
import { forbidden, notFound } from './errors.js';
import { newId } from './ids.js';
import { newKeyMaterial, type KeyService } from './keys.js';
import { credentialHash, type Sealer } from './secrets.js';

/**
 * Domain-scoped keys (`key_`): send from and manage one domain only; revoked at once by delete (every process's
 * key cache forgets it on the commit's notification, this one before it answers).
 */
export function createScopedKeyService(deps: {
  db: Db;
  sealer: Sealer;
  domains: DomainService;
  keys?: Pick<KeyService, 'forget'>;
}) {
  const { db, sealer } = deps;
  const k = schema.apiKeys;
  const d = schema.domains;

  const dto = (r: {
    id: string;
    userId: string;
    domainId: string | null;
    domain: string;
    name: string | null;
    keySealed: string;
    createdAt: number;
    lastUsedAt: number | null;
  }) => ({
    id: r.id,
    user_id: r.userId,
    domain_id: r.domainId!,
    domain: r.domain,
    name: r.name ?? '',
    key: sealer.open(r.keySealed),
    created_at: r.createdAt,
    last_used_at: r.lastUsedAt,
  });
  const noScoped = (actor: Actor) => {
    if (actor.domainId) throw forbidden('A domain-scoped key cannot manage keys', 'wrong_credential');
  };

  return {
    async list(actor: Actor) {
      noScoped(actor);
      const rows = await db
        .select({
          id: k.id,
          userId: k.userId,
          domainId: k.domainId,
          domain: d.domain,
          name: k.name,
          keySealed: k.keySealed,
          createdAt: k.createdAt,
          lastUsedAt: k.lastUsedAt,
        })
        .from(k)
        .innerJoin(d, eq(d.id, k.domainId))
        .where(and(eq(k.userId, actor.userId), eq(k.kind, 'scoped')))
        .orderBy(desc(k.createdAt));
      return rows.map(dto);
    },
    async create(actor: Actor, input: { domainId: string; name?: string }) {
      noScoped(actor);
      const domain = await deps.domains.load(actor, input.domainId);
      const key = newKeyMaterial();
      const [row] = await db
        .insert(k)
        .values({
          id: newId('key'),
          userId: actor.userId,
          kind: 'scoped',
          domainId: domain.id,
          name: input.name ?? domain.domain,
          keyHash: credentialHash(key),
          keySealed: sealer.seal(key),
          createdAt: Date.now(),
        })
        .returning();
      return dto({ ...row!, domain: domain.domain });
    },
    async revoke(actor: Actor, id: string) {
      noScoped(actor);
      const gone = await db
        .delete(k)
        .where(and(eq(k.id, id), eq(k.userId, actor.userId), eq(k.kind, 'scoped')))
        .returning({ keyHash: k.keyHash });
      if (gone.length === 0) throw notFound('Scoped key not found');
      for (const { keyHash } of gone) deps.keys?.forget(keyHash);
      return { ok: true as const };
    },
  };
}
export type ScopedKeyService = ReturnType<typeof createScopedKeyService>;
