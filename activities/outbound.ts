import { and, asc, eq, isNull, lt } from 'drizzle-orm';
import type { Db } from '../db/index.js';
import { schema } from '../db/index.js';
import type { DeliveryService } from '../core/sending/delivery.js';

/** Outbound activities: thin wrappers over the delivery service (claims make each one idempotent per message). */
export function outboundActivities(deps: { db: Db; delivery: DeliveryService }) {
  const m = schema.messages;
  return {
    /** Claims and delivers a batch of queued messages for this workflow run; records each outcome. */
    sendQueuedMessages: (input: { messageIds: string[]; workflowId: string }) => deps.delivery.sendQueued(input),

    /** One later attempt at a deferred message; `final` makes a temporary failure a hard bounce. */
    retryDeferredMessage: (input: { messageId: string; final: boolean; nextAttemptAt: number | null }) => deps.delivery.retryDeferred(input),

    /** Ids of outbound rows still `queued` and unclaimed after `olderThanMs`: their batch never started. */
    async findStrandedMessages(input: { olderThanMs: number; limit: number }): Promise<string[]> {
      const rows = await deps.db.select({ id: m.id }).from(m)
        .where(and(eq(m.status, 'queued'), eq(m.direction, 'outbound'), isNull(m.workflowId), lt(m.createdAt, Date.now() - input.olderThanMs)))
        .orderBy(asc(m.createdAt)).limit(input.limit);
      return rows.map((r) => r.id);
    },
  };
}
