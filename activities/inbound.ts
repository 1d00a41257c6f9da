import type { InboundService } from '../core/inbound/service.js';
import type { DeliveryStore } from '../core/webhooks/deliveries.js';
import { withProgress } from './progress.js';

/** Inbound activities: deliveries for a message, one captured webhook attempt, and the retention step. All idempotent. */
export function inboundActivities(deps: { inbound: InboundService; deliveryStore: DeliveryStore }) {
  return {
    prepareInboundDeliveries: (input: { messageId: string }) => deps.inbound.prepareDeliveries(input.messageId),
    /** One signed POST, captured as an att_ row; a repeated call for the same attempt answers the recorded outcome. */
    attemptWebhookDelivery: (input: { deliveryId: string; attemptNumber: number; nextDelayMs: number | null }) =>
      withProgress((progress) => deps.deliveryStore.attempt(input.deliveryId, input.attemptNumber, input.nextDelayMs, progress)),
    finishInboundMessage: (input: { messageId: string }) => deps.inbound.finish(input.messageId),
  };
}
