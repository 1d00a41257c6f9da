import type { DeliveryService } from '../core/outbound/delivery.js';
import type { OutboundWorkflows } from '../core/ports/sending.js';
import { withProgress } from './progress.js';

/** Outbound activities: thin wrappers over the delivery service (claims and recorded outcomes make each safe to run twice). */
export function outboundActivities(deps: { delivery: DeliveryService; workflows: OutboundWorkflows }) {
  return {
    /** Claims and delivers a batch of queued messages for this run; records each outcome as its server answers; heartbeats per message. */
    sendQueuedMessages: (input: { messageIds: string[]; workflowId: string; nextAttemptAt?: number | null }) =>
      withProgress((progress) => deps.delivery.sendQueued(input, progress)),

    /** One later attempt at a deferred message's owed recipients; `final` makes a temporary failure a hard bounce. */
    retryDeferredMessage: (input: {
      messageId: string;
      workflowId: string;
      final: boolean;
      nextAttemptAt: number | null;
    }) => withProgress((progress) => deps.delivery.retryDeferred(input, progress)),

    /** Ids of outbound rows still `queued` and unclaimed after `olderThanMs` (read-only). */
    findStrandedMessages: (input: { olderThanMs: number; limit: number }) =>
      deps.delivery.findStranded(input.olderThanMs, input.limit),

    /** Restarts the deferred ladder of rows no workflow will move (idempotent: a running ladder is kept). */
    async restartAbandonedMessages(input: {
      deferredGraceMs: number;
      sendingGraceMs: number;
      limit: number;
    }): Promise<number> {
      const ids = await deps.delivery.findAbandoned(input);
      for (const id of ids) await deps.workflows.startDeferredDelivery(id);
      return ids.length;
    },
  };
}
