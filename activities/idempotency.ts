import { deleteExpiredIdempotencyKeys } from '../core/idempotency.js';
import type { Db } from '../db/index.js';

/** Idempotency-key housekeeping (table idempotency_keys, docs/idempotency.md). */
export function idempotencyActivities(deps: { db: Db }) {
  return {
    /** Deletes up to `limit` keys past their 24 hours and answers how many; idempotent (a retry finds fewer). */
    async pruneIdempotencyKeys(input: { limit: number }): Promise<number> {
      return deleteExpiredIdempotencyKeys(deps.db, Date.now(), input.limit);
    },
  };
}
