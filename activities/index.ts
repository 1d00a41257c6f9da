import type { AttachmentService } from '../core/attachments/service.js';
import type { DomainService } from '../core/domains/service.js';
import type { DkimRotation } from '../core/domains/rotation.js';
import type { InboundService } from '../core/inbound/service.js';
import type { EngagementService } from '../core/webhooks/engagement.js';
import type { DeliveryStore } from '../core/webhooks/deliveries.js';
import type { DeliveryService } from '../core/outbound/delivery.js';
import type { ScheduledSendService } from '../core/sending/scheduled.js';
import type { Db } from '../db/index.js';
import type { DkimRotationWorkflows } from '../core/ports/domains.js';
import type { EngagementWorkflows, InboundBatchWorkflows } from '../core/ports/inbound.js';
import type { OutboundWorkflows } from '../core/ports/sending.js';
import { withFailureMapping } from './failures.js';
import type { FanoutService } from '../core/broadcasts/fanout.js';
import type { ImportService } from '../core/contacts/imports.js';
import { attachmentActivities } from './attachments.js';
import { broadcastActivities } from './broadcasts.js';
import { domainActivities } from './domains.js';
import { engagementActivities } from './engagement.js';
import { feedbackGuardActivities } from './feedback-guard.js';
import type { GuardService } from '../core/feedback/guard.js';
import { idempotencyActivities } from './idempotency.js';
import { inboundActivities } from './inbound.js';
import { outboundActivities } from './outbound.js';
import { scheduledActivities } from './scheduled.js';
import { sequenceActivities } from './sequences.js';
import { warmupActivities } from './warmup.js';
import { tlsReportActivities } from './tls-reports.js';
import { mtaStsActivities } from './mta-sts.js';
import type { MtaStsService } from '../core/mta-sts/service.js';
import type { TlsReportSender } from '../core/feedback/tls-report-send.js';
import type { WarmupService } from '../core/shaping/warmup.js';
import type { SequenceDispatcher } from '../core/sequences/dispatch.js';
import type { EnrolmentStore } from '../core/sequences/enrolments.js';
import type { SendEnrolments } from '../core/sequences/send-enrolment.js';

/** The workflows the activities start: deferred ladders, DKIM rotations, inbound batches, engagement dispatch. */
type ActivityWorkflows = OutboundWorkflows & DkimRotationWorkflows & InboundBatchWorkflows & EngagementWorkflows;

export type ActivityDeps = {
  workflows: ActivityWorkflows;
  engagement: EngagementService;
  inbound: InboundService;
  deliveryStore: DeliveryStore;
  db: Db;
  delivery: DeliveryService;
  domains: DomainService;
  dkimRotation: DkimRotation;
  scheduled: ScheduledSendService;
  attachments: AttachmentService;
  fanout: FanoutService;
  imports: ImportService;
  enrolmentStore: EnrolmentStore;
  dispatcher: SequenceDispatcher;
  sendEnrolments: SendEnrolments;
  warmup: WarmupService;
  tlsReports: TlsReportSender;
  feedbackGuard: GuardService;
  mtaSts: Pick<MtaStsService, 'refresh'>;
};

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
    ...idempotencyActivities(deps),
    ...warmupActivities(deps),
    ...tlsReportActivities(deps),
    ...feedbackGuardActivities(deps),
    ...mtaStsActivities(deps),
    /** Does nothing: the local activity of the benchmarks' reference workflow. */
    benchmarkNoop: async () => undefined,
  });
}
export type Activities = ReturnType<typeof createActivities>;
