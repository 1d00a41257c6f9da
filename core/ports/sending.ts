/** Outbound delivery runs: a flush of queued messages, and the deferred ladder of one message. */
export type OutboundWorkflows = {
  /** Starts one outbound delivery run for a flush of one account's queued messages. */
  startOutboundBatch(messageIds: string[], accountId: string): Promise<void>;
  /** Starts (or keeps, when running) the deferred-delivery ladder of one message. */
  startDeferredDelivery(messageId: string): Promise<void>;
};

/** Scheduled sends: the workflow that parks one send until its time. */
export type ScheduledSendWorkflows = {
  /** Starts the workflow that parks one scheduled send until its time. */
  startScheduledSend(s: { id: string; messageId: string; userId: string; scheduledAt: number }): Promise<void>;
  /**
   * Cancels a parked send through its workflow update: `canceled`; `too_late` once sending began; `closed`
   * when its workflow has ended; `unavailable` when no worker answered within a few seconds.
   */
  cancelScheduledSend(id: string): Promise<'canceled' | 'too_late' | 'closed' | 'unavailable'>;
  /** Whether the workflow of a scheduled send still runs. */
  scheduledSendState(id: string): Promise<'running' | 'closed' | 'missing'>;
};

/** The workflows of sending: outbound runs and scheduled sends. */
export type SendingWorkflows = OutboundWorkflows & ScheduledSendWorkflows;
