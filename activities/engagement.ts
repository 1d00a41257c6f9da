import { lt } from 'drizzle-orm';
import type { Db } from '../db/index.js';
import { schema } from '../db/index.js';
import type { EngagementWorkflows } from '../core/ports/inbound.js';
import type { EngagementService } from '../core/webhooks/engagement.js';
import { withProgress } from './progress.js';

/** Engagement and retention activities. Dispatch claims events and writes each outcome, so a retried batch skips what it sent. */
export function engagementActivities(deps: { db: Db; engagement: EngagementService; workflows: EngagementWorkflows }) {
  return {
    /** One claimed, time-boxed batch of a domain's events; heartbeats per event and stops when cancelled. */
    dispatchEngagementBatch: (input: { domainId: string; limit: number }) =>
      withProgress((progress) => deps.engagement.dispatchBatch(input.domainId, input.limit, progress)),
    /** Signal-with-start to the dispatcher of each domain with events left pending; answers how many. */
    async wakeStrandedEngagement(input: { olderThanMs: number }): Promise<number> {
      const domains = await deps.engagement.strandedDomains(input.olderThanMs);
      for (const d of domains) await deps.workflows.nudgeEngagement(d.domainId, d.userId);
      return domains.length;
    },
    /** Deletes attempt captures past retention, at most `limit` per call. */
    async pruneDeliveryAttempts(input: { olderThanMs: number; limit: number }): Promise<number> {
      const a = schema.deliveryAttempts;
      const gone = await deps.db
        .delete(a)
        .where(lt(a.createdAt, Date.now() - input.olderThanMs))
        .returning({ id: a.id });
      return gone.length;
    },
  };
}
