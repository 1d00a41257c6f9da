import type { BroadcastWorkflows } from './broadcasts.js';
import type { ImportWorkflows } from './contacts.js';
import type { DomainWorkflows } from './domains.js';
import type { InboundWorkflows } from './inbound.js';
import type { MtaStsWorkflows } from './mta-sts.js';
import type { OperationsWorkflows } from './operations.js';
import type { SendingWorkflows } from './sending.js';
import type { SequenceWorkflows } from './sequences.js';

export type { BroadcastProgress, BroadcastWorkflows } from './broadcasts.js';
export type { ImportProgress, ImportWorkflows } from './contacts.js';
export type {
  DkimRotationWorkflows,
  DomainWorkflows,
  GuardWorkflows,
  VerificationWorkflows,
  WarmupWorkflows,
} from './domains.js';
export type {
  EngagementWorkflows,
  InboundBatchWorkflows,
  InboundWorkflows,
  WebhookDeliveryWorkflows,
} from './inbound.js';
export type { MtaStsWorkflows } from './mta-sts.js';
export type { OperationsWorkflows } from './operations.js';
export type { OutboundWorkflows, ScheduledSendWorkflows, SendingWorkflows } from './sending.js';
export type { EnrolmentPort, EnrolmentSignalPort, SequenceWorkflows } from './sequences.js';

/**
 * Every workflow core starts, signals or asks, by area: what the composition root hands out (each service
 * gets its area's part) and the one implementation in temporal/client.ts answers.
 */
export type WorkflowPort = SendingWorkflows &
  DomainWorkflows &
  InboundWorkflows &
  BroadcastWorkflows &
  ImportWorkflows &
  SequenceWorkflows &
  OperationsWorkflows &
  MtaStsWorkflows;
