export { cleanupAttachmentsWorkflow } from './cleanup-attachments.js';
export { deliverOutboundWorkflow } from './deliver-outbound.js';
export { sweepOutboundWorkflow } from './sweep-outbound.js';
export { verifyDomainWorkflow } from './verify-domain.js';
export { deferredDeliveryWorkflow } from './deferred-delivery.js';
export { scheduledSendWorkflow } from './scheduled-send.js';
export { inboundDeliveryWorkflow } from './inbound-delivery.js';
export { webhookDeliveryWorkflow } from './webhook-delivery.js';
