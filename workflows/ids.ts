/** Deterministic workflow ids, derived from the entity each workflow models (DESIGN.md, workflows/). */
export const deliverOutboundWorkflowId = (firstMessageId: string) => `outbound-${firstMessageId}`;
/** Schedules are per task queue, so deployments (or test runs) sharing a namespace keep their own. */
export const sweepOutboundScheduleId = (taskQueue: string) => `outbound-sweep-${taskQueue}`;
export const cleanupAttachmentsScheduleId = (taskQueue: string) => `attachments-cleanup-${taskQueue}`;
export const verifyDomainWorkflowId = (domainId: string) => `verify-domain-${domainId}`;
export const deferredDeliveryWorkflowId = (messageId: string) => `deferred-${messageId}`;
export const scheduledSendWorkflowId = (scheduledSendId: string) => `scheduled-${scheduledSendId}`;
export const inboundDeliveryWorkflowId = (messageId: string) => `inbound-${messageId}`;
/** One run per group of inbound messages accepted together, named by its first message. */
export const inboundBatchWorkflowId = (firstMessageId: string) => `inbound-batch-${firstMessageId}`;
export const webhookDeliveryWorkflowId = (deliveryId: string) => `webhook-${deliveryId}`;
export const engagementDispatchWorkflowId = (domainId: string) => `engagement-${domainId}`;
export const engagementSweepScheduleId = (taskQueue: string) => `engagement-sweep-${taskQueue}`;
export const pruneAttemptsScheduleId = (taskQueue: string) => `attempts-prune-${taskQueue}`;
export const pruneIdempotencyKeysScheduleId = (taskQueue: string) => `idempotency-prune-${taskQueue}`;
export const sweepHeldInboundScheduleId = (taskQueue: string) => `held-inbound-sweep-${taskQueue}`;
export const broadcastWorkflowId = (broadcastId: string) => `broadcast-${broadcastId}`;
/** One delivery run per broadcast batch, named by the ledger position of its first recipient. */
export const broadcastBatchWorkflowId = (broadcastId: string, firstSeq: number) =>
  `broadcast-${broadcastId}-batch-${firstSeq}`;
export const contactImportWorkflowId = (importId: string) => `import-${importId}`;
/** One enrolment at a time per (sequence, contact): starting or signalling this id reaches the open one. */
export const sequenceEnrolmentWorkflowId = (sequenceId: string, contactId: string) =>
  `sequence-${sequenceId}-${contactId}`;
export const sweepSequencesScheduleId = (taskQueue: string) => `sequences-sweep-${taskQueue}`;
export const dkimRotationWorkflowId = (domainId: string) => `dkim-rotate-${domainId}`;
export const dkimRotationScheduleId = (taskQueue: string) => `dkim-rotation-${taskQueue}`;
export const warmupWorkflowId = (domainId: string) => `warmup-${domainId}`;
/** The TLS report run, on its schedule (TLS_REPORT_PERIOD); an operator's run now is `tls-reports-now-<task queue>`. */
export const tlsReportsScheduleId = (taskQueue: string) => `tls-reports-${taskQueue}`;
export const tlsReportsNowWorkflowId = (taskQueue: string) => `tls-reports-now-${taskQueue}`;
export const domainGuardWorkflowId = (domainId: string) => `domain-guard-${domainId}`;
/** The MTA-STS policy fetch of a recipient domain (lowercased): one run at a time, started again once finished. */
export const mtaStsFetchWorkflowId = (domain: string) => `mta-sts-${domain}`;
