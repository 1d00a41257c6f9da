import type { AttachmentService } from '../core/attachments/service.js';
import type { DomainService } from '../core/domains/service.js';
import type { InboundService } from '../core/inbound/service.js';
import type { EngagementService } from '../core/webhooks/engagement.js';
import type { DeliveryStore } from '../core/webhooks/deliveries.js';
import type { DeliveryService } from '../core/sending/delivery.js';
import type { ScheduledSendService } from '../core/sending/scheduled.js';
import type { Db } from '../db/index.js';
import type { WorkflowPort } from '../core/index.js';
import { withFailureMapping } from './failures.js';
import type { FanoutService } from '../core/broadcasts/fanout.js';
import type { ImportService } from '../core/contacts/imports.js';
import { attachmentActivities } from './attachments.js';
import { broadcastActivities } from './broadcasts.js';
import { domainActivities } from './domains.js';
import { engagementActivities } from './engagement.js';
import { inboundActivities } from './inbound.js';
import { outboundActivities } from './outbound.js';
import { scheduledActivities } from './scheduled.js';
import { sequenceActivities } from './sequences.js';
import type { SequenceDispatcher } from '../core/sequences/dispatch.js';
import type { EnrolmentStore } from '../core/sequences/enrolments.js';

export type ActivityDeps = { workflows: WorkflowPort; engagement: EngagementService; inbound: InboundService; deliveryStore: DeliveryStore; db: Db; delivery: DeliveryService; domains: DomainService; scheduled: ScheduledSendService; attachments: AttachmentService; fanout: FanoutService; imports: ImportService;
  enrolmentStore: EnrolmentStore; dispatcher: SequenceDispatcher };

/** Every activity the worker registers, built from its real dependencies (the composition root passes them). */
export function createActivities(deps: ActivityDeps) {
  return withFailureMapping({
    ...outboundActivities(deps),
    ...domainActivities(deps),
    ...attachmentActivities(deps),
    ...scheduledActivities(deps),
    ...inboundActivities(deps),
    ...engagementActivities(deps),
    ...broadcastActivities(deps),
    ...sequenceActivities(deps),
    /** Does nothing: the local activity of the benchmarks' reference workflow. */
    benchmarkNoop: async () => undefined,
  });
}
export type Activities = ReturnType<typeof createActivities>;
