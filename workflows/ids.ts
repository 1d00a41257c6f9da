/** Deterministic workflow ids, derived from the entity each workflow models (DESIGN.md, workflows/). */
export const deliverOutboundWorkflowId = (firstMessageId: string) => `outbound-${firstMessageId}`;
export const sweepOutboundScheduleId = 'outbound-sweep';
