export { deliverOutboundWorkflow } from './deliver-outbound.js';
export { sweepOutboundWorkflow } from './sweep-outbound.js';
export { verifyDomainWorkflow } from './verify-domain.js';
