import { type ApplicationFailure, Client, Connection, WorkflowExecutionAlreadyStartedError, WorkflowNotFoundError, WorkflowUpdateFailedError } from '@temporalio/client';
import proto from '@temporalio/proto';
import type { WorkflowPort } from '../core/index.js';
import { broadcastWorkflowId, contactImportWorkflowId, deliverOutboundWorkflowId, engagementDispatchWorkflowId, inboundDeliveryWorkflowId, scheduledSendWorkflowId, verifyDomainWorkflowId, webhookDeliveryWorkflowId } from '../workflows/ids.js';
import { SvcAccountId, SvcBroadcastId, SvcBroadcastStatus, SvcDomain, SvcDomainStatus, SvcMessageId } from '../workflows/search-attributes.js';
import type { BroadcastInput, BroadcastProgress } from '../workflows/broadcast.js';
import type { ImportProgress } from '../workflows/import-contacts.js';
import { SEARCH_ATTRIBUTES } from './search-attributes.js';

export type TemporalHandle = { client: Client; connection: Connection; namespace: string; taskQueue: string };

/** Connects to the frontend, waiting (up to `waitMs`) until it answers for the namespace. */
export async function connectTemporal(opts: { address: string; namespace: string; taskQueue: string; waitMs?: number }): Promise<TemporalHandle> {
  const deadline = Date.now() + (opts.waitMs ?? 30_000);
  let lastError: unknown;
  while (Date.now() < deadline) {
    try {
      const connection = await Connection.connect({ address: opts.address, connectTimeout: 2_000 });
      await connection.workflowService.describeNamespace({ namespace: opts.namespace });
      return { client: new Client({ connection, namespace: opts.namespace }), connection, namespace: opts.namespace, taskQueue: opts.taskQueue };
    } catch (err) {
      lastError = err;
      await new Promise((r) => setTimeout(r, 500));
    }
  }
  throw new Error(`Temporal at ${opts.address} (namespace ${opts.namespace}) is not reachable: ${(lastError as Error)?.message}`);
}

/** Registers the service's search attributes on a server we did not start (idempotent). */
export async function ensureSearchAttributes(t: TemporalHandle): Promise<void> {
  const existing = await t.connection.operatorService.listSearchAttributes({ namespace: t.namespace });
  const missing = Object.keys(SEARCH_ATTRIBUTES).filter((name) => !(name in (existing.customAttributes ?? {})));
  if (missing.length === 0) return;
  await t.connection.operatorService.addSearchAttributes({
    namespace: t.namespace,
    searchAttributes: Object.fromEntries(missing.map((n) => [n, proto.temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD])),
  });
}

export type DomainVerifyTiming = { initialDelayMs: number; maxDelayMs: number; deadlineMs: number };

const ignoreNotFound = (err: unknown) => {
  if (!(err instanceof WorkflowNotFoundError)) throw err;
};

/** The WorkflowPort core uses, backed by a real Temporal client. */
export type WorkflowSettings = {
  domainVerify: DomainVerifyTiming; outboundRetrySchedule: number[]; webhookRetrySchedule: number[];
  broadcast: { batchSize: number; concurrency: number; domainRate: number; batchesPerRun: number; importChunkRows: number };
};

/** A query with a short deadline: the API falls back to the database row when a run does not answer in time. */
async function quickQuery<T>(t: TemporalHandle, workflowId: string, query: string, ms = 1500): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<undefined>((resolve) => { timer = setTimeout(() => resolve(undefined), ms); });
  try {
    return await Promise.race([t.client.workflow.getHandle(workflowId).query<T>(query).catch(() => undefined), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

export function createWorkflowPort(t: TemporalHandle, settings: WorkflowSettings): WorkflowPort {
  const timing = settings.domainVerify;
  const retrySchedule = settings.outboundRetrySchedule;
  return {
    async startInboundDelivery(m) {
      await t.client.workflow.start('inboundDeliveryWorkflow', {
        taskQueue: t.taskQueue, workflowId: inboundDeliveryWorkflowId(m.messageId), workflowIdConflictPolicy: 'USE_EXISTING',
        workflowIdReusePolicy: 'REJECT_DUPLICATE', args: [{ messageId: m.messageId, retrySchedule: settings.webhookRetrySchedule }],
        typedSearchAttributes: [{ key: SvcAccountId, value: m.userId }, { key: SvcMessageId, value: m.messageId }],
      }).catch((err) => {
        // A finished workflow with this id means the message was delivered already: a retried SMTP transaction.
        if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
      });
    },
    async startBroadcast(b) {
      const args: BroadcastInput = {
        broadcastId: b.broadcastId, scheduledAt: b.scheduledAt, retrySchedule, batchSize: settings.broadcast.batchSize,
        concurrency: settings.broadcast.concurrency, domainRate: settings.broadcast.domainRate, batchesPerRun: settings.broadcast.batchesPerRun,
      };
      await t.client.workflow.start('broadcastWorkflow', {
        taskQueue: t.taskQueue, workflowId: broadcastWorkflowId(b.broadcastId), workflowIdConflictPolicy: 'USE_EXISTING', args: [args],
        typedSearchAttributes: [
          { key: SvcAccountId, value: b.userId }, { key: SvcBroadcastId, value: b.broadcastId },
          { key: SvcBroadcastStatus, value: b.scheduledAt ? 'scheduled' : 'sending' },
        ],
      });
    },
    async cancelBroadcast(broadcastId) {
      try {
        await t.client.workflow.getHandle(broadcastWorkflowId(broadcastId)).signal('cancelSignal');
        return true;
      } catch (err) {
        if (err instanceof WorkflowNotFoundError) return false;
        throw err;
      }
    },
    broadcastProgress: (broadcastId) => quickQuery<BroadcastProgress>(t, broadcastWorkflowId(broadcastId), 'progressQuery'),
    async startContactImport(i) {
      await t.client.workflow.start('importContactsWorkflow', {
        taskQueue: t.taskQueue, workflowId: contactImportWorkflowId(i.importId), workflowIdConflictPolicy: 'USE_EXISTING',
        args: [{ importId: i.importId, chunkRows: settings.broadcast.importChunkRows }], typedSearchAttributes: [{ key: SvcAccountId, value: i.userId }],
      });
    },
    async contactImportProgress(importId) {
      return (await quickQuery<ImportProgress | null>(t, contactImportWorkflowId(importId), 'importProgressQuery')) ?? undefined;
    },
    async nudgeEngagement(domainId) {
      await t.client.workflow.signalWithStart('engagementDispatchWorkflow', {
        taskQueue: t.taskQueue, workflowId: engagementDispatchWorkflowId(domainId), args: [{ domainId }], signal: 'moreEventsSignal', signalArgs: [],
      });
    },
    async startWebhookDelivery(d) {
      await t.client.workflow.start('webhookDeliveryWorkflow', {
        taskQueue: t.taskQueue, workflowId: webhookDeliveryWorkflowId(d.deliveryId), workflowIdConflictPolicy: 'USE_EXISTING',
        args: [{ deliveryId: d.deliveryId, retrySchedule: settings.webhookRetrySchedule, startAttempt: d.startAttempt }],
      });
    },
    async startScheduledSend(s) {
      await t.client.workflow.start('scheduledSendWorkflow', {
        taskQueue: t.taskQueue, workflowId: scheduledSendWorkflowId(s.id), workflowIdConflictPolicy: 'USE_EXISTING',
        args: [{ scheduledSendId: s.id, messageId: s.messageId, scheduledAt: s.scheduledAt, retrySchedule }],
        typedSearchAttributes: [{ key: SvcAccountId, value: s.userId }, { key: SvcMessageId, value: s.messageId }],
      });
    },
    async cancelScheduledSend(id) {
      try {
        await t.client.workflow.getHandle(scheduledSendWorkflowId(id)).executeUpdate('cancelUpdate');
        return 'canceled';
      } catch (err) {
        if (err instanceof WorkflowUpdateFailedError && (err.cause as ApplicationFailure | undefined)?.type === 'too_late') return 'too_late';
        // The workflow has finished: it either sent the message or was canceled already.
        if (err instanceof WorkflowNotFoundError || (err as Error).message?.includes('workflow execution already completed')) return 'too_late';
        throw err;
      }
    },
    async startDomainVerification(d) {
      await t.client.workflow.start('verifyDomainWorkflow', {
        taskQueue: t.taskQueue,
        workflowId: verifyDomainWorkflowId(d.domainId),
        args: [{ ...d, ...timing }],
        workflowIdConflictPolicy: 'USE_EXISTING',
        typedSearchAttributes: [
          { key: SvcAccountId, value: d.userId }, { key: SvcDomain, value: d.domain }, { key: SvcDomainStatus, value: 'pending' },
        ],
      });
    },
    async nudgeDomainVerification(domainId) {
      await t.client.workflow.getHandle(verifyDomainWorkflowId(domainId)).signal('checkNowSignal').catch(ignoreNotFound);
    },
    async stopDomainVerification(domainId) {
      await t.client.workflow.getHandle(verifyDomainWorkflowId(domainId)).terminate('domain deleted').catch(ignoreNotFound);
    },
    async startOutboundBatch(messageIds) {
      await t.client.workflow.start('deliverOutboundWorkflow', {
        taskQueue: t.taskQueue,
        workflowId: deliverOutboundWorkflowId(messageIds[0]!),
        args: [{ messageIds, retrySchedule }],
        workflowIdConflictPolicy: 'USE_EXISTING',
      });
    },
    async ping() {
      await t.connection.workflowService.getSystemInfo({});
    },
  };
}
