import { eq } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import type { EgressConfig, Stream } from './config.js';

/** How long a process trusts its view of an account's assigned pools (an operator's change shows within it). */
export const ASSIGNMENT_CACHE_MS = 30_000;

/**
 * Which pool a message leaves from (docs/transport-policy.md): the sending domain's pinned provider
 * (a paid plan's choice or an operator's assignment), else the pool an operator assigned to the account
 * for the message's stream, else for all its mail, else the stream's default. A name no longer in the
 * file falls through to the next.
 */
export function createEgressRouter(deps: { db: Db; config: EgressConfig }) {
  const cache = new Map<string, { at: number; byStream: Map<string, string> }>();
  async function assignments(userId: string): Promise<Map<string, string>> {
    const hit = cache.get(userId);
    if (hit && Date.now() - hit.at < ASSIGNMENT_CACHE_MS) return hit.byStream;
    const rows = await deps.db
      .select({ stream: schema.egressAssignments.stream, pool: schema.egressAssignments.pool })
      .from(schema.egressAssignments)
      .where(eq(schema.egressAssignments.userId, userId));
    const byStream = new Map(rows.map((r) => [r.stream, r.pool]));
    if (cache.size > 10_000) cache.clear();
    cache.set(userId, { at: Date.now(), byStream });
    return byStream;
  }
  const known = (p: string | null | undefined): p is string => Boolean(p && deps.config.pools.has(p));
  return {
    async poolFor(m: { userId: string | null; stream: Stream; domainPool?: string | null }): Promise<string> {
      if (known(m.domainPool)) return m.domainPool;
      if (m.userId) {
        const a = await assignments(m.userId);
        const chosen = a.get(m.stream) ?? a.get('all');
        if (known(chosen)) return chosen;
      }
      return deps.config.streams[m.stream];
    },
    /** Forgets an account's cached assignments (this process; others within ASSIGNMENT_CACHE_MS). */
    forget: (userId: string) => cache.delete(userId),
  };
}
export type EgressRouter = ReturnType<typeof createEgressRouter>;
