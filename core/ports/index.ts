import type { EnrolmentEvent, EnrolmentStart, EnrolmentState } from './sequences.js';

/** Starts and signals sequence enrolments (the dispatcher's side). */
export type EnrolmentSignalPort = {
  enrolContact(start: EnrolmentStart, events: EnrolmentEvent[]): Promise<void>;
  signalEnrolment(workflowId: string, events: EnrolmentEvent[]): Promise<void>;
  enrolmentWorkflowId(sequenceId: string, contactId: string): string;
};

/** Reads and stops sequence enrolments (the sequence service's side). */
export type EnrolmentPort = {
  enrolmentState(workflowId: string): Promise<EnrolmentState | undefined>;
  cancelEnrolment(workflowId: string): Promise<boolean>;
  /** Sends contactChangedSignal (an enrolment that has ended is fine). */
  nudgeEnrolment(workflowId: string): Promise<void>;
};

/** What the fan-out workflow answers to `progressQuery`. */
export type BroadcastProgress = { phase: string; sent: number; failed: number; skipped: number; remaining: number | null; currentBatch: number; audience: number | null };

/** What the import workflow answers to `importProgressQuery`. */
export type ImportProgress = {
  status: 'running' | 'done' | 'failed'; rowsRead: number; created: number; updated: number; rejected: number; rejections: { row: number; reason: string }[];
};

/** The ports core needs from the Temporal side; implemented in temporal/ with a real client. */
export type WorkflowPort = EnrolmentSignalPort & EnrolmentPort & {
  /** Starts one outbound delivery run for a flush of one account's queued messages. */
  startOutboundBatch(messageIds: string[], accountId: string): Promise<void>;
  /** Starts (or keeps, when running) the deferred-delivery ladder of one message. */
  startDeferredDelivery(messageId: string): Promise<void>;
  /** Starts the workflow that parks one scheduled send until its time. */
  startScheduledSend(s: { id: string; messageId: string; userId: string; scheduledAt: number }): Promise<void>;
  /**
   * Cancels a parked send through its workflow update: `canceled`; `too_late` once sending began; `closed`
   * when its workflow has ended; `unavailable` when no worker answered within a few seconds.
   */
  cancelScheduledSend(id: string): Promise<'canceled' | 'too_late' | 'closed' | 'unavailable'>;
  /** Whether the workflow of a scheduled send still runs. */
  scheduledSendState(id: string): Promise<'running' | 'closed' | 'missing'>;
  /** Starts the DNS verification loop of a domain (starting twice is success). */
  startDomainVerification(d: { domainId: string; userId: string; domain: string }): Promise<void>;
  /** Asks a running verification loop to check again now. */
  nudgeDomainVerification(domainId: string): Promise<void>;
  stopDomainVerification(domainId: string): Promise<void>;
  /** Starts the DKIM key rotation of a domain; false when one is already running (docs/domains.md). */
  startDkimRotation(domainId: string): Promise<boolean>;
  /** Asks a rotation waiting for its record to look again now (no rotation running is fine). */
  nudgeDkimRotation(domainId: string): Promise<void>;
  /** Starts the warm-up plan workflow of a domain (`warmup-<id>`). */
  startWarmup(w: { domainId: string; userId: string; days: number; dayMs: number }): Promise<void>;
  /** Terminates a domain's warm-up workflow (none running is fine). */
  stopWarmup(domainId: string): Promise<void>;
  /** One run for inbound messages accepted together: their first attempts; failures go on in their own runs. */
  startInboundBatch(messageIds: string[], accountId: string): Promise<void>;
  /** Continues a delivery's retry ladder in its own workflow, from `startAttempt`. */
  startWebhookDelivery(d: { deliveryId: string; startAttempt: number; userId: string; messageId: string }): Promise<void>;
  /** Starts the fan-out workflow of a broadcast (starting twice is success); it waits until `scheduledAt` when given. */
  startBroadcast(b: { broadcastId: string; userId: string; scheduledAt?: number }): Promise<void>;
  /** Sends `cancelSignal` to a broadcast's run; false when no run is open. */
  cancelBroadcast(broadcastId: string): Promise<boolean>;
  /** The running broadcast's `progressQuery` answer (short timeout); undefined when it cannot answer. */
  broadcastProgress(broadcastId: string): Promise<BroadcastProgress | undefined>;
  /** Starts the CSV import workflow of one import (starting twice is success). */
  startContactImport(i: { importId: string; userId: string }): Promise<void>;
  contactImportProgress(importId: string): Promise<ImportProgress | undefined>;
  /** Wakes (or starts) the one engagement dispatcher of a domain (signal-with-start). */
  nudgeEngagement(domainId: string, userId?: string): Promise<void>;
  ping(): Promise<void>;
  /** How long the namespace keeps closed runs, in ms (the doctor's retention check); null when unset. */
  retentionMs(): Promise<number | null>;
};
