import { lt } from 'drizzle-orm';
import type { Db } from '../db/index.js';
import { schema } from '../db/index.js';
import type { EngagementService } from '../core/webhooks/engagement.js';

/** Engagement and retention activities. Dispatch marks each event done/failed, so a retried batch skips what it sent. */
export function engagementActivities(deps: { db: Db; engagement: EngagementService }) {
  return {
    dispatchEngagementBatch: (input: { domainId: string; limit: number }) => deps.engagement.dispatchBatch(input.domainId, input.limit),
    findStrandedEngagement: (input: { olderThanMs: number }) => deps.engagement.strandedDomains(input.olderThanMs),
    /** Deletes attempt captures past retention, at most `limit` per call. */
    async pruneDeliveryAttempts(input: { olderThanMs: number; limit: number }): Promise<number> {
      const a = schema.deliveryAttempts;
      const gone = await deps.db.delete(a).where(lt(a.createdAt, Date.now() - input.olderThanMs)).returning({ id: a.id });
      return gone.length;
    },
  };
}
