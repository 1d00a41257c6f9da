/** The first attempts of inbound messages accepted together. */
export type InboundBatchWorkflows = {
  /** One run for inbound messages accepted together: their first attempts; failures go on in their own runs. */
  startInboundBatch(messageIds: string[], accountId: string): Promise<void>;
};

/** A webhook delivery's retry ladder, in its own workflow. */
export type WebhookDeliveryWorkflows = {
  /** Continues a delivery's retry ladder in its own workflow, from `startAttempt`. */
  startWebhookDelivery(d: {
    deliveryId: string;
    startAttempt: number;
    userId: string;
    messageId: string;
  }): Promise<void>;
};

/** The engagement dispatcher of a domain. */
export type EngagementWorkflows = {
  /** Wakes (or starts) the one engagement dispatcher of a domain (signal-with-start). */
  nudgeEngagement(domainId: string, userId?: string): Promise<void>;
};

/** The workflows of inbound mail and webhooks: inbound batches, webhook deliveries, engagement dispatch. */
export type InboundWorkflows = InboundBatchWorkflows & WebhookDeliveryWorkflows & EngagementWorkflows;
