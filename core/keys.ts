import { and, eq, sql } from 'drizzle-orm';
import type { Database, Db } from '../db/index.js';
import { schema } from '../db/index.js';
import { createCredentialCache } from './credential-cache.js';
import { newId, randomToken } from './ids.js';
import { credentialHash, type Sealer } from './secrets.js';

export const KEY_PREFIX = 'svc_live_';
export const newKeyMaterial = () => `${KEY_PREFIX}${randomToken(24)}`;

export type KeyRow = typeof schema.apiKeys.$inferSelect;

/**
 * The unrestricted account key: read-or-create, and rotation that kills the old key at once.
 * With `listen` (the database's LISTEN), key rows are cached per process by hash (core/credential-cache.ts):
 * a known key reads no table, and no process accepts a key once the transaction deleting it has committed.
 */
export function createKeyService(deps: { db: Db; sealer: Sealer; listen?: Database['listen'] }) {
  const { db, sealer } = deps;
  const cache = createCredentialCache<KeyRow>({ listen: deps.listen });
  // When this process last wrote `last_used_at` per key id: concurrent requests holding separate copies of a row
  // (read before the cache could serve it) write it once all the same. Bounded like the cache.
  const touched = new Map<string, number>();
  // Every API-key request runs this: prepared once (built once by drizzle, parsed once per connection by PostgreSQL).
  const byHash = db
    .select()
    .from(schema.apiKeys)
    .where(eq(schema.apiKeys.keyHash, sql.placeholder('hash')))
    .prepare('api_key_by_hash');

  async function findAccountKey(userId: string): Promise<KeyRow | undefined> {
    const [row] = await db
      .select()
      .from(schema.apiKeys)
      .where(and(eq(schema.apiKeys.userId, userId), eq(schema.apiKeys.kind, 'account')));
    return row;
  }

  function keyValues(userId: string, key: string) {
    return {
      id: newId('key'),
      userId,
      kind: 'account' as const,
      keyHash: credentialHash(key),
      keySealed: sealer.seal(key),
      createdAt: Date.now(),
    };
  }

  return {
    /** Returns the account key, minting it on first call; concurrent first calls agree on one key. */
    async getOrCreateAccountKey(userId: string): Promise<string> {
      const existing = await findAccountKey(userId);
      if (existing) return sealer.open(existing.keySealed);
      const key = newKeyMaterial();
      await db.insert(schema.apiKeys).values(keyValues(userId, key)).onConflictDoNothing();
      const row = await findAccountKey(userId);
      if (!row) throw new Error('account key vanished after insert');
      return sealer.open(row.keySealed);
    },

    /** Replaces the account key; the old one stops authenticating immediately. */
    async rotateAccountKey(userId: string): Promise<string> {
      const key = newKeyMaterial();
      const gone = await db.transaction(async (tx) => {
        const old = await tx
          .delete(schema.apiKeys)
          .where(and(eq(schema.apiKeys.userId, userId), eq(schema.apiKeys.kind, 'account')))
          .returning({ keyHash: schema.apiKeys.keyHash });
        await tx.insert(schema.apiKeys).values(keyValues(userId, key));
        return old;
      });
      // Other processes forget it on the commit's notification; this one before it answers.
      for (const { keyHash } of gone) cache.forget(keyHash);
      return key;
    },

    /** Finds the key row for presented key material (account or scoped), or undefined. */
    async lookup(key: string): Promise<KeyRow | undefined> {
      const hash = credentialHash(key);
      const cached = await cache.get(hash);
      if (cached) return cached;
      const stamp = cache.stamp();
      const [row] = await byHash.execute({ hash });
      if (row) cache.set(hash, row, stamp);
      return row;
    },

    /** Drops a key this process may hold, right after the transaction that deleted it committed. */
    forget(keyHash: string): void {
      cache.forget(keyHash);
    },

    /** The cache's counters and state (tests, diagnostics). */
    cache,

    /** Keeps `last_used_at`, writing at most once a minute per key (and per process, remembered in memory). */
    async touch(row: KeyRow): Promise<void> {
      const now = Date.now();
      if (now - Math.max(row.lastUsedAt ?? 0, touched.get(row.id) ?? 0) < 60_000) return;
      row.lastUsedAt = now;
      touched.delete(row.id);
      if (touched.size >= 10_000) touched.delete(touched.keys().next().value!);
      touched.set(row.id, now);
      await db
        .update(schema.apiKeys)
        .set({ lastUsedAt: now })
        .where(and(eq(schema.apiKeys.id, row.id), sql`coalesce(${schema.apiKeys.lastUsedAt}, 0) < ${now - 60_000}`));
    },
  };
}
export type KeyService = ReturnType<typeof createKeyService>;
