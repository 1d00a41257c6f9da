export { cleanupAttachmentsWorkflow } from './cleanup-attachments.js';
export { deliverOutboundWorkflow } from './deliver-outbound.js';
export { sweepOutboundWorkflow } from './sweep-outbound.js';
export { verifyDomainWorkflow } from './verify-domain.js';
export { deferredDeliveryWorkflow } from './deferred-delivery.js';
export { scheduledSendWorkflow } from './scheduled-send.js';
export { inboundDeliveryWorkflow } from './inbound-delivery.js';
export { inboundBatchWorkflow } from './inbound-batch.js';
export { webhookDeliveryWorkflow } from './webhook-delivery.js';
export { engagementDispatchWorkflow } from './engagement-dispatch.js';
export {
  pruneAttemptsWorkflow,
  pruneIdempotencyKeysWorkflow,
  sweepEngagementWorkflow,
  sweepSequencesWorkflow,
  sweepHeldInboundWorkflow,
} from './housekeeping.js';
export { enrolSequenceWorkflow } from './sequence-enrolment.js';
export { referenceWorkflow } from './reference.js';
export { broadcastWorkflow } from './broadcast.js';
export { importContactsWorkflow } from './import-contacts.js';
export { dkimRotationWorkflow, scheduleDkimRotationsWorkflow } from './dkim-rotation.js';
export { warmupWorkflow } from './warmup.js';
export { tlsReportsWorkflow } from './tls-reports.js';
export { domainGuardWorkflow } from './domain-guard.js';
export { mtaStsFetchWorkflow } from './mta-sts.js';
