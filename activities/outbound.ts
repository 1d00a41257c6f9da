import type { DeliveryService } from '../core/sending/delivery.js';

/** Outbound activities: thin wrappers over the delivery service (claims make each one idempotent per message). */
export function outboundActivities(deps: { delivery: DeliveryService }) {
  return {
    /** Claims and delivers a batch of queued messages for this workflow run; records each outcome. */
    sendQueuedMessages: (input: { messageIds: string[]; workflowId: string }) => deps.delivery.sendQueued(input),

    /** One later attempt at a deferred message; `final` makes a temporary failure a hard bounce. */
    retryDeferredMessage: (input: { messageId: string; final: boolean; nextAttemptAt: number | null }) => deps.delivery.retryDeferred(input),

    /** Ids of outbound rows still `queued` and unclaimed after `olderThanMs` (read-only). */
    findStrandedMessages: (input: { olderThanMs: number; limit: number }) => deps.delivery.findStranded(input.olderThanMs, input.limit),
  };
}
