import type { InboundBatchWorkflows } from '../core/ports/inbound.js';
import type { InboundService } from '../core/inbound/service.js';
import type { DeliveryStore } from '../core/webhooks/deliveries.js';
import { deliverInboundBatch } from '../core/inbound/batch.js';
import { withProgress } from './progress.js';
import { sweepExpiredHeld } from '../core/inbound/quarantine.js';
import type { Db } from '../db/index.js';

/** Inbound activities: deliveries for a message, one captured webhook attempt, and the retention step. All idempotent. */
export function inboundActivities(deps: {
  inbound: InboundService;
  deliveryStore: DeliveryStore;
  workflows: InboundBatchWorkflows;
  db: Db;
}) {
  return {
    /** Claims the message for its own run (or takes it over from the batch that handed it on) and creates its deliveries. */
    prepareInboundDeliveries: (input: { messageId: string; takeOverFrom?: string }) =>
      deps.inbound.prepareDeliveries(input.messageId, input.takeOverFrom ? { takeOverFrom: input.takeOverFrom } : {}),
    /** An inbound batch's first attempts; answers the messages whose ladder goes on in their own run. */
    deliverInboundBatch: (input: { batchId: string; messageIds: string[]; nextDelayMs: number | null }) =>
      withProgress((progress) =>
        deliverInboundBatch({ inbound: deps.inbound, deliveries: deps.deliveryStore }, input, progress),
      ),
    finishInboundBatch: (input: { batchId: string; messageIds: string[] }) =>
      deps.inbound.finishClaimed(input.batchId, input.messageIds),
    /** One signed POST, captured as an att_ row; a repeated call for the same attempt answers the recorded outcome. */
    attemptWebhookDelivery: (input: { deliveryId: string; attemptNumber: number; nextDelayMs: number | null }) =>
      withProgress((progress) =>
        deps.deliveryStore.attempt(input.deliveryId, input.attemptNumber, input.nextDelayMs, progress),
      ),
    finishInboundMessage: (input: { messageId: string }) => deps.inbound.finish(input.messageId),
    /** Deletes up to `limit` held messages past their QUARANTINE_DAYS (docs/inbound-policy.md); idempotent. */
    sweepHeldInbound: (input: { limit: number }) => sweepExpiredHeld(deps.db, input.limit),
    /**
     * Starts batch runs for stored messages a crash (or a failed start) left unstarted, 100 per run and
     * one account per run, as the ingress would have; a message another run took meanwhile is left to it.
     */
    async startUnstartedInbound(input: { olderThanMs: number; limit: number }): Promise<number> {
      const rows = await deps.inbound.findUnstarted(input.olderThanMs, input.limit);
      const byAccount = new Map<string, string[]>();
      for (const r of rows) byAccount.set(r.userId, [...(byAccount.get(r.userId) ?? []), r.messageId]);
      for (const [userId, ids] of byAccount) {
        for (let i = 0; i < ids.length; i += 100) await deps.workflows.startInboundBatch(ids.slice(i, i + 100), userId);
      }
      return rows.length;
    },
  };
}
