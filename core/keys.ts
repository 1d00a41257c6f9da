import { and, eq, sql } from 'drizzle-orm';
import type { Db } from '../db/index.js';
import { schema } from '../db/index.js';
import { newId, randomToken } from './ids.js';
import { credentialHash, type Sealer } from './secrets.js';

export const KEY_PREFIX = 'svc_live_';
export const newKeyMaterial = () => `${KEY_PREFIX}${randomToken(24)}`;

export type KeyRow = typeof schema.apiKeys.$inferSelect;

/** The unrestricted account key: read-or-create, and rotation that kills the old key at once. */
export function createKeyService(deps: { db: Db; sealer: Sealer }) {
  const { db, sealer } = deps;
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
      await db.transaction(async (tx) => {
        await tx
          .delete(schema.apiKeys)
          .where(and(eq(schema.apiKeys.userId, userId), eq(schema.apiKeys.kind, 'account')));
        await tx.insert(schema.apiKeys).values(keyValues(userId, key));
      });
      return key;
    },

    /** Finds the key row for presented key material (account or scoped), or undefined. */
    async lookup(key: string): Promise<KeyRow | undefined> {
      const [row] = await byHash.execute({ hash: credentialHash(key) });
      return row;
    },

    /** Keeps `last_used_at`, writing at most once a minute per key. */
    async touch(row: KeyRow): Promise<void> {
      const now = Date.now();
      if (row.lastUsedAt && now - row.lastUsedAt < 60_000) return;
      await db
        .update(schema.apiKeys)
        .set({ lastUsedAt: now })
        .where(and(eq(schema.apiKeys.id, row.id), sql`coalesce(${schema.apiKeys.lastUsedAt}, 0) < ${now - 60_000}`));
    },
  };
}
export type KeyService = ReturnType<typeof createKeyService>;
