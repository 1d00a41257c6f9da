import {
  type ApplicationFailure,
  Client,
  type WorkflowClientInterceptor,
  Connection,
  WorkflowNotFoundError,
  WorkflowUpdateFailedError,
  WorkflowUpdateRPCTimeoutOrCancelledError,
} from '@temporalio/client';
import type { QueryDefinition } from '@temporalio/common';
import proto from '@temporalio/proto';
import type { WorkflowPort } from '../core/ports/index.js';
import { deferredDeliveryWorkflow } from '../workflows/deferred-delivery.js';
import { deliverOutboundWorkflow } from '../workflows/deliver-outbound.js';
import { broadcastWorkflow, cancelSignal, progressQuery, type BroadcastInput } from '../workflows/broadcast.js';
import { importContactsWorkflow, importProgressQuery } from '../workflows/import-contacts.js';
import { engagementDispatchWorkflow, moreEventsSignal } from '../workflows/engagement-dispatch.js';
import {
  broadcastWorkflowId,
  contactImportWorkflowId,
  deferredDeliveryWorkflowId,
  deliverOutboundWorkflowId,
  engagementDispatchWorkflowId,
  inboundBatchWorkflowId,
  scheduledSendWorkflowId,
  sequenceEnrolmentWorkflowId,
  verifyDomainWorkflowId,
  warmupWorkflowId,
  webhookDeliveryWorkflowId,
  dkimRotationWorkflowId,
  tlsReportsNowWorkflowId,
  domainGuardWorkflowId,
  mtaStsFetchWorkflowId,
} from '../workflows/ids.js';
import { warmupWorkflow } from '../workflows/warmup.js';
import { domainGuardWorkflow, feedbackSignal, resumeSendingSignal } from '../workflows/domain-guard.js';
import { bulkResumedSignal } from '../workflows/broadcast.js';
import { inboundBatchWorkflow } from '../workflows/inbound-batch.js';
import {
  appEventSignal,
  cancelEnrolmentSignal,
  contactChangedSignal,
  enrolSequenceWorkflow,
  stateQuery,
} from '../workflows/sequence-enrolment.js';
import { cancelUpdate, scheduledSendWorkflow } from '../workflows/scheduled-send.js';
import {
  SvcAccountId,
  SvcBroadcastId,
  SvcBroadcastStatus,
  SvcDeliveryId,
  SvcContactId,
  SvcDomain,
  SvcDomainId,
  SvcDomainStatus,
  SvcMessageId,
  SvcSequenceId,
  SvcSequenceStep,
} from '../workflows/search-attributes.js';
import { checkNowSignal, verifyDomainWorkflow } from '../workflows/verify-domain.js';
import { dkimCheckNowSignal, dkimRotationWorkflow } from '../workflows/dkim-rotation.js';
import { tlsReportsWorkflow } from '../workflows/tls-reports.js';
import { mtaStsFetchWorkflow, mtaStsRecheckSignal } from '../workflows/mta-sts.js';
import { SIGNING_KEY_CACHE_MS } from '../core/transport/dkim.js';
import { webhookDeliveryWorkflow } from '../workflows/webhook-delivery.js';
import { SEARCH_ATTRIBUTES } from './search-attributes.js';

export type TemporalHandle = { client: Client; connection: Connection; namespace: string; taskQueue: string };

/** Connects to the frontend, waiting (up to `waitMs`) until it answers for the namespace. */
export async function connectTemporal(opts: {
  address: string;
  namespace: string;
  taskQueue: string;
  waitMs?: number;
  interceptors?: WorkflowClientInterceptor[];
}): Promise<TemporalHandle> {
  const deadline = Date.now() + (opts.waitMs ?? 30_000);
  let lastError: unknown;
  while (Date.now() < deadline) {
    try {
      const connection = await Connection.connect({ address: opts.address, connectTimeout: 2_000 });
      await connection.workflowService.describeNamespace({ namespace: opts.namespace });
      return {
        client: new Client({
          connection,
          namespace: opts.namespace,
          interceptors: { workflow: opts.interceptors ?? [] },
        }),
        connection,
        namespace: opts.namespace,
        taskQueue: opts.taskQueue,
      };
    } catch (err) {
      lastError = err;
      await new Promise((r) => setTimeout(r, 500));
    }
  }
  throw new Error(
    `Temporal at ${opts.address} (namespace ${opts.namespace}) is not reachable: ${(lastError as Error)?.message}`,
  );
}

/**
 * Registers the search attributes the namespace does not list yet, answering their names. One caller at a
 * time (temporal/search-attribute-setup.ts serializes the roles): concurrent adds race on the SQL columns.
 * An attribute listed with another type (SvcMessageId was a Keyword before it held every id of a batch)
 * is removed and added again with its type: the server cannot change a type in place, and a run started
 * with the new type's value would be refused. Runs indexed under the old type are no longer found by it.
 */
export async function ensureSearchAttributes(
  t: TemporalHandle,
  log: (m: string) => void = () => undefined,
): Promise<string[]> {
  const existing =
    (await t.connection.operatorService.listSearchAttributes({ namespace: t.namespace })).customAttributes ?? {};
  const want = (n: string) =>
    proto.temporal.api.enums.v1.IndexedValueType[`INDEXED_VALUE_TYPE_${SEARCH_ATTRIBUTES[n]!}`];
  const retyped = Object.keys(SEARCH_ATTRIBUTES).filter((n) => n in existing && existing[n] !== want(n));
  if (retyped.length > 0) {
    log(
      `[temporal] search attributes ${retyped.join(', ')} have another type in namespace ${t.namespace}; removing them to add them as ${retyped.map((n) => SEARCH_ATTRIBUTES[n]).join(', ')}`,
    );
    await t.connection.operatorService.removeSearchAttributes({ namespace: t.namespace, searchAttributes: retyped });
  }
  const missing = Object.keys(SEARCH_ATTRIBUTES).filter((name) => !(name in existing) || retyped.includes(name));
  if (missing.length === 0) return [];
  await t.connection.operatorService.addSearchAttributes({
    namespace: t.namespace,
    searchAttributes: Object.fromEntries(missing.map((n) => [n, want(n)])),
  });
  return missing;
}

export type DomainVerifyTiming = { initialDelayMs: number; maxDelayMs: number; deadlineMs: number };

const ignoreNotFound = (err: unknown) => {
  if (!(err instanceof WorkflowNotFoundError)) throw err;
};
/** How long an API call waits on a workflow update before answering 503 (no worker polling, say). */
const UPDATE_DEADLINE_MS = 5_000;

/** The timings and sizes the workflows are started with (from the config). */
export type WorkflowSettings = {
  domainVerify: DomainVerifyTiming;
  outboundRetrySchedule: number[];
  webhookRetrySchedule: number[];
  dkimRotation: { graceMs: number };
  broadcast: {
    batchSize: number;
    concurrency: number;
    domainRate: number;
    batchesPerRun: number;
    importChunkRows: number;
  };
};

/** A query with a short deadline: the API falls back to the database row when a run does not answer in time. */
async function quickQuery<T>(
  t: TemporalHandle,
  workflowId: string,
  query: QueryDefinition<T>,
  ms = 1500,
): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), ms);
  });
  try {
    return await Promise.race([
      t.client.workflow
        .getHandle(workflowId)
        .query<T>(query)
        .catch(() => undefined),
      timeout,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** Every area's workflow port core uses (core/ports/), backed by a real Temporal client. */
export function createWorkflowPort(t: TemporalHandle, settings: WorkflowSettings): WorkflowPort {
  const timing = settings.domainVerify;
  const retrySchedule = settings.outboundRetrySchedule;
  const taskQueue = t.taskQueue;
  return {
    async startInboundBatch(messageIds, accountId) {
      await t.client.workflow.start(inboundBatchWorkflow, {
        taskQueue,
        workflowId: inboundBatchWorkflowId(messageIds[0]!),
        workflowIdConflictPolicy: 'USE_EXISTING',
        args: [{ messageIds, retrySchedule: settings.webhookRetrySchedule }],
        // Every id in SvcMessageId (a KeywordList; the server's value limit is raised to 4 KB for 100 ids), and in the memo.
        memo: { messageIds },
        typedSearchAttributes: [
          { key: SvcMessageId, value: messageIds },
          { key: SvcAccountId, value: accountId },
        ],
      });
    },
    async startBroadcast(b) {
      const args: BroadcastInput = {
        broadcastId: b.broadcastId,
        userId: b.userId,
        scheduledAt: b.scheduledAt,
        retrySchedule,
        batchSize: settings.broadcast.batchSize,
        concurrency: settings.broadcast.concurrency,
        domainRate: settings.broadcast.domainRate,
        batchesPerRun: settings.broadcast.batchesPerRun,
      };
      await t.client.workflow.start(broadcastWorkflow, {
        taskQueue,
        workflowId: broadcastWorkflowId(b.broadcastId),
        workflowIdConflictPolicy: 'USE_EXISTING',
        args: [args],
        typedSearchAttributes: [
          { key: SvcAccountId, value: b.userId },
          { key: SvcBroadcastId, value: b.broadcastId },
          { key: SvcBroadcastStatus, value: b.scheduledAt ? 'scheduled' : 'sending' },
        ],
      });
    },
    async cancelBroadcast(broadcastId) {
      try {
        await t.client.workflow.getHandle(broadcastWorkflowId(broadcastId)).signal(cancelSignal);
        return true;
      } catch (err) {
        if (err instanceof WorkflowNotFoundError) return false;
        throw err;
      }
    },
    broadcastProgress: (broadcastId) => quickQuery(t, broadcastWorkflowId(broadcastId), progressQuery),
    async startContactImport(i) {
      await t.client.workflow.start(importContactsWorkflow, {
        taskQueue,
        workflowId: contactImportWorkflowId(i.importId),
        workflowIdConflictPolicy: 'USE_EXISTING',
        args: [{ importId: i.importId, chunkRows: settings.broadcast.importChunkRows }],
        typedSearchAttributes: [{ key: SvcAccountId, value: i.userId }],
      });
    },
    async contactImportProgress(importId) {
      return (await quickQuery(t, contactImportWorkflowId(importId), importProgressQuery)) ?? undefined;
    },
    async nudgeEngagement(domainId, userId) {
      // Signal-with-start: the one dispatcher of the domain wakes, or starts; nudges coalesce into one flag.
      await t.client.workflow.signalWithStart(engagementDispatchWorkflow, {
        taskQueue,
        workflowId: engagementDispatchWorkflowId(domainId),
        args: [{ domainId }],
        signal: moreEventsSignal,
        signalArgs: [],
        typedSearchAttributes: [
          { key: SvcDomainId, value: domainId },
          ...(userId ? [{ key: SvcAccountId, value: userId }] : []),
        ],
      });
    },
    enrolmentWorkflowId: sequenceEnrolmentWorkflowId,
    async enrolContact(start, events) {
      // Signal-with-start: the open enrolment of (sequence, contact) gets the events, or one starts with them.
      await t.client.workflow.signalWithStart(enrolSequenceWorkflow, {
        taskQueue,
        workflowId: sequenceEnrolmentWorkflowId(start.sequenceId, start.contactId),
        args: [start],
        signal: appEventSignal,
        signalArgs: [events],
        typedSearchAttributes: [
          { key: SvcAccountId, value: start.userId },
          { key: SvcSequenceId, value: start.sequenceId },
          { key: SvcContactId, value: start.contactId },
          { key: SvcSequenceStep, value: 0 },
        ],
      });
    },
    async signalEnrolment(workflowId, events) {
      await t.client.workflow.getHandle(workflowId).signal(appEventSignal, events).catch(ignoreNotFound);
    },
    async cancelEnrolment(workflowId) {
      try {
        await t.client.workflow.getHandle(workflowId).signal(cancelEnrolmentSignal);
        return true;
      } catch (err) {
        if (err instanceof WorkflowNotFoundError) return false;
        throw err;
      }
    },
    enrolmentState: (workflowId) => quickQuery(t, workflowId, stateQuery),
    async nudgeEnrolment(workflowId) {
      await t.client.workflow.getHandle(workflowId).signal(contactChangedSignal).catch(ignoreNotFound);
    },
    async startWebhookDelivery(d) {
      await t.client.workflow.start(webhookDeliveryWorkflow, {
        taskQueue,
        workflowId: webhookDeliveryWorkflowId(d.deliveryId),
        workflowIdConflictPolicy: 'USE_EXISTING',
        args: [
          { deliveryId: d.deliveryId, retrySchedule: settings.webhookRetrySchedule, startAttempt: d.startAttempt },
        ],
        typedSearchAttributes: [
          { key: SvcDeliveryId, value: d.deliveryId },
          { key: SvcAccountId, value: d.userId },
          { key: SvcMessageId, value: [d.messageId] },
        ],
      });
    },
    async startScheduledSend(s) {
      await t.client.workflow.start(scheduledSendWorkflow, {
        taskQueue,
        workflowId: scheduledSendWorkflowId(s.id),
        workflowIdConflictPolicy: 'USE_EXISTING',
        args: [{ scheduledSendId: s.id, messageId: s.messageId, scheduledAt: s.scheduledAt, retrySchedule }],
        typedSearchAttributes: [
          { key: SvcAccountId, value: s.userId },
          { key: SvcMessageId, value: [s.messageId] },
        ],
      });
    },
    async cancelScheduledSend(id) {
      try {
        // A deadline: with no worker polling, an update would wait for ever; the caller gets a 503 instead.
        await t.connection.withDeadline(Date.now() + UPDATE_DEADLINE_MS, () =>
          t.client.workflow
            .getHandle(scheduledSendWorkflowId(id))
            .executeUpdate(cancelUpdate, { updateId: `cancel-${id}` }),
        );
        return 'canceled';
      } catch (err) {
        if (
          err instanceof WorkflowUpdateFailedError &&
          (err.cause as ApplicationFailure | undefined)?.type === 'too_late'
        )
          return 'too_late';
        if (
          err instanceof WorkflowNotFoundError ||
          (err as Error).message?.includes('workflow execution already completed')
        )
          return 'closed';
        // The SDK reports a deadline (or a call cut short while waiting for it) as its own error type.
        if (err instanceof WorkflowUpdateRPCTimeoutOrCancelledError || isDeadline(err)) return 'unavailable';
        throw err;
      }
    },
    async scheduledSendState(id) {
      try {
        const d = await t.client.workflow.getHandle(scheduledSendWorkflowId(id)).describe();
        return d.status.name === 'RUNNING' ? 'running' : 'closed';
      } catch (err) {
        ignoreNotFound(err);
        return 'missing';
      }
    },
    async startDomainVerification(d) {
      await t.client.workflow.start(verifyDomainWorkflow, {
        taskQueue,
        workflowId: verifyDomainWorkflowId(d.domainId),
        args: [{ ...d, ...timing }],
        workflowIdConflictPolicy: 'USE_EXISTING',
        typedSearchAttributes: [
          { key: SvcAccountId, value: d.userId },
          { key: SvcDomain, value: d.domain },
          { key: SvcDomainId, value: d.domainId },
          { key: SvcDomainStatus, value: 'pending' },
        ],
      });
    },
    async nudgeDomainVerification(domainId) {
      await t.client.workflow.getHandle(verifyDomainWorkflowId(domainId)).signal(checkNowSignal).catch(ignoreNotFound);
    },
    async startDkimRotation(domainId) {
      // The old selector stays published at least twice as long as any signer may keep the old key cached.
      const graceMs = Math.max(settings.dkimRotation.graceMs, 2 * SIGNING_KEY_CACHE_MS);
      try {
        await t.client.workflow.start(dkimRotationWorkflow, {
          taskQueue,
          workflowId: dkimRotationWorkflowId(domainId),
          args: [{ domainId, ...timing, graceMs }],
          workflowIdConflictPolicy: 'FAIL',
          typedSearchAttributes: [{ key: SvcDomainId, value: domainId }],
        });
        return true;
      } catch (err) {
        if ((err as Error).name === 'WorkflowExecutionAlreadyStartedError') return false;
        throw err;
      }
    },
    async nudgeDkimRotation(domainId) {
      await t.client.workflow
        .getHandle(dkimRotationWorkflowId(domainId))
        .signal(dkimCheckNowSignal)
        .catch((err: unknown) => {
          // No rotation, or one already finished: nothing to nudge.
          if (!(err instanceof WorkflowNotFoundError) && !String((err as Error).message).includes('already completed'))
            throw err;
        });
    },
    async startWarmup(w) {
      await t.client.workflow.start(warmupWorkflow, {
        taskQueue,
        workflowId: warmupWorkflowId(w.domainId),
        args: [{ domainId: w.domainId, days: w.days, dayMs: w.dayMs }],
        workflowIdConflictPolicy: 'TERMINATE_EXISTING',
        typedSearchAttributes: [
          { key: SvcAccountId, value: w.userId },
          { key: SvcDomainId, value: w.domainId },
        ],
      });
    },
    async stopWarmup(domainId) {
      await t.client.workflow
        .getHandle(warmupWorkflowId(domainId))
        .terminate('warm-up plan stopped or restarted')
        .catch(ignoreNotFound);
    },
    async signalDomainGuard(domainId, userId) {
      // Signal-with-start: the one guard of the domain hears of new complaints or bounces, or starts.
      await t.client.workflow.signalWithStart(domainGuardWorkflow, {
        taskQueue,
        workflowId: domainGuardWorkflowId(domainId),
        args: [{ domainId }],
        signal: feedbackSignal,
        signalArgs: [],
        typedSearchAttributes: [
          { key: SvcDomainId, value: domainId },
          { key: SvcAccountId, value: userId },
        ],
      });
    },
    async resumeDomainGuard(domainId, userId) {
      await t.client.workflow.signalWithStart(domainGuardWorkflow, {
        taskQueue,
        workflowId: domainGuardWorkflowId(domainId),
        args: [{ domainId }],
        signal: resumeSendingSignal,
        signalArgs: [],
        typedSearchAttributes: [
          { key: SvcDomainId, value: domainId },
          { key: SvcAccountId, value: userId },
        ],
      });
    },
    async wakeBroadcast(broadcastId) {
      await t.client.workflow
        .getHandle(broadcastWorkflowId(broadcastId))
        .signal(bulkResumedSignal)
        .catch(ignoreNotFound);
    },
    async stopDomainVerification(domainId) {
      await t.client.workflow
        .getHandle(verifyDomainWorkflowId(domainId))
        .terminate('domain deleted')
        .catch(ignoreNotFound);
    },
    async startOutboundBatch(messageIds, accountId) {
      await t.client.workflow.start(deliverOutboundWorkflow, {
        taskQueue,
        workflowId: deliverOutboundWorkflowId(messageIds[0]!),
        args: [{ messageIds, retrySchedule }],
        workflowIdConflictPolicy: 'USE_EXISTING',
        // Every id in SvcMessageId (a KeywordList; the server's value limit is raised to 4 KB for 100 ids), and in the memo.
        memo: { messageIds },
        typedSearchAttributes: [
          { key: SvcMessageId, value: messageIds },
          ...(accountId ? [{ key: SvcAccountId, value: accountId }] : []),
        ],
      });
    },
    async startDeferredDelivery(messageId) {
      await t.client.workflow.start(deferredDeliveryWorkflow, {
        taskQueue,
        workflowId: deferredDeliveryWorkflowId(messageId),
        args: [{ messageId, retrySchedule }],
        workflowIdConflictPolicy: 'USE_EXISTING',
        typedSearchAttributes: [{ key: SvcMessageId, value: [messageId] }],
      });
    },
    async startMtaStsFetch(domain) {
      // Signal-with-start: a finished run starts again; a run under way is asked to read the record once more
      // after its fetch (a new id that arrives while it finishes is not missed).
      await t.client.workflow.signalWithStart(mtaStsFetchWorkflow, {
        taskQueue,
        workflowId: mtaStsFetchWorkflowId(domain),
        args: [{ domain }],
        signal: mtaStsRecheckSignal,
      });
    },
    async ping() {
      await t.connection.workflowService.getSystemInfo({});
    },
    // One run at a time: a second call while one runs waits for the same run's answer.
    runTlsReportsNow: () =>
      t.client.workflow.execute(tlsReportsWorkflow, {
        taskQueue,
        workflowId: tlsReportsNowWorkflowId(taskQueue),
        args: [{ includeCurrent: true }],
        workflowIdConflictPolicy: 'USE_EXISTING',
      }),
    retentionMs: () => namespaceRetentionMs(t.connection, t.namespace),
  };
}

const DEADLINE_EXCEEDED = 4; // gRPC status code

/** A call the server did not answer in time (a loaded server): trying again may succeed. */
export function isDeadline(err: unknown): boolean {
  const e = err as { code?: number; cause?: { code?: number } };
  return (
    e.code === DEADLINE_EXCEEDED ||
    e.cause?.code === DEADLINE_EXCEEDED ||
    /deadline/i.test((err as Error)?.message ?? '')
  );
}

/** How long the namespace keeps closed runs (describeNamespace), in ms; null when it reports none. */
export async function namespaceRetentionMs(connection: Connection, namespace: string): Promise<number | null> {
  const ns = await connection.workflowService.describeNamespace({ namespace });
  const ttl = ns.config?.workflowExecutionRetentionTtl;
  return ttl ? Number(String(ttl.seconds ?? 0)) * 1000 + Math.round((ttl.nanos ?? 0) / 1e6) : null;
}
