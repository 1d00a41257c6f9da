import { eq } from 'drizzle-orm';
import { schema, type Db } from '../../db/index.js';
import type { MtaStsPolicy } from './policy.js';

export type PolicyRow = typeof schema.mtaStsPolicies.$inferSelect;

/** The cached MTA-STS answers of recipient domains (`mta_sts_policies`), one row per domain. */
export function createPolicyStore(db: Db) {
  const t = schema.mtaStsPolicies;
  return {
    async get(domain: string): Promise<PolicyRow | undefined> {
      const [row] = await db.select().from(t).where(eq(t.domain, domain)).limit(1);
      return row;
    },
    /** Writes the domain's row whole (a new fetch's outcome replaces the previous one). */
    async put(row: PolicyRow): Promise<void> {
      const { domain: _domain, ...rest } = row;
      await db.insert(t).values(row).onConflictDoUpdate({ target: t.domain, set: rest });
    },
    /** Notes a refresh that failed on a row kept in force (the cached policy stays until it expires). */
    async noteError(domain: string, error: string): Promise<void> {
      await db.update(t).set({ error }).where(eq(t.domain, domain));
    },
    /** Forgets the domain's row; true when there was one. */
    async remove(domain: string): Promise<boolean> {
      const gone = await db.delete(t).where(eq(t.domain, domain)).returning({ domain: t.domain });
      return gone.length > 0;
    },
  };
}
export type PolicyStore = ReturnType<typeof createPolicyStore>;

/** A row that holds a usable policy until its expiry. */
export const livePolicy = (row: PolicyRow | undefined, now: number): row is PolicyRow =>
  row !== undefined && row.status === 'ok' && row.expiresAt > now;

/** The policy a live `ok` row holds (null when its mode is none: nothing to apply). */
export function policyOf(row: PolicyRow): MtaStsPolicy | null {
  if (row.status !== 'ok' || !row.mode || row.mode === 'none') return null;
  return { id: row.recordId ?? '', mode: row.mode, mx: row.mx, maxAge: row.maxAge ?? 0 };
}
