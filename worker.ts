import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { NativeConnection, Worker, type WorkerOptions } from '@temporalio/worker';
import { createActivities } from './activities/index.js';
import type { Config } from './core/config.js';
import { createResolver } from './core/dns.js';
import { instrumentTransport } from './core/transport/instrumented.js';
import { createTlsOutcomeRecorder, type TlsOutcomeRecorder } from './core/shaping/tls-outcomes.js';
import { createEgressCounter } from './core/egress/counters.js';
import type { MtaStsLookup } from './core/mta-sts/policy.js';
import { captureTransport, mxTransport, relayTransport, type OutboundTransport } from './core/transport/transport.js';
import type { Database } from './db/index.js';
import type { Composition } from './core/index.js';
import { prebuiltBundle, WORKFLOW_INTERCEPTORS } from './temporal/bundle.js';
import type { Tracing } from './temporal/tracing.js';
import { logScopeInterceptor } from './temporal/log-scope.js';

export const WORKFLOWS_PATH = fileURLToPath(new URL('./workflows/index.ts', import.meta.url));

/** The bundle a worker runs: SVC_WORKFLOW_BUNDLE (tests hand theirs in), else the prebuilt one when fresh, else none (bundle now). */
function bundleToRun(configured: string | undefined): WorkerOptions['workflowBundle'] | undefined {
  const path = configured || prebuiltBundle();
  return path ? { codePath: path } : undefined;
}

export type RunningWorker = { worker: Worker; done: Promise<void>; shutdown(): Promise<void> };

/** The sending provider chosen by OUTBOUND_MODE. */
export function createTransport(
  config: Config,
  database: Database,
  tls?: TlsOutcomeRecorder,
  mtaSts?: MtaStsLookup,
): OutboundTransport {
  if (config.outboundMode === 'capture') return captureTransport(database.db, join(config.dataDir, 'outbox'));
  const timeouts = { timeoutMs: config.outboundSmtpTimeoutMs };
  if (config.outboundMode === 'relay') return relayTransport(config.relayUrl!, timeouts);
  return mxTransport({
    resolver: createResolver(config.dnsServers),
    port: config.mxPort,
    heloName: config.serviceDomain,
    timeouts,
    allowPrivate: config.allowPrivateNetworks,
    shaping: { db: database.db, config: config.shaping },
    tls,
    egress: config.egress,
    mtaSts,
    trustedCa: config.outboundTlsCaFile ? readFileSync(config.outboundTlsCaFile, 'utf8') : undefined,
  });
}

/**
 * The Temporal worker: the composition root of activities (real db, transport, resolver) and the
 * registered workflows (the workflows/index.ts barrel). `workflowBundle` lets tests bundle once.
 */
export async function startWorker(opts: {
  core: Composition;
  address: string;
  workflowBundle?: WorkerOptions['workflowBundle'];
  tracing?: Tracing;
}): Promise<RunningWorker> {
  const { config, database } = opts.core;
  // Each MX session's TLS outcome, counted in memory and written every few seconds (docs/tls-reporting.md).
  const tls = createTlsOutcomeRecorder({ db: database.db, periodMs: config.feedback.tlsReportPeriodMs });
  // Outcomes per account, egress source, pool and hour, written every few seconds (core/egress/counters.ts).
  const egress = createEgressCounter({ db: database.db });
  // MTA-STS policies of recipient domains, cached per process and fetched by a workflow (docs/mta-sts.md).
  const transport = instrumentTransport(createTransport(config, database, tls, opts.core.mtaSts.lookup()), egress);
  const connection = await NativeConnection.connect({ address: opts.address });
  const bundle = opts.workflowBundle ?? bundleToRun(config.workflowBundle);
  const worker = await Worker.create({
    connection,
    namespace: config.temporal.namespace,
    taskQueue: config.temporal.taskQueue,
    activities: createActivities({
      workflows: opts.core.workflows,
      db: database.db,
      domains: opts.core.domains,
      dkimRotation: opts.core.dkimRotation,
      scheduled: opts.core.scheduled,
      attachments: opts.core.attachments,
      inbound: opts.core.inbound,
      deliveryStore: opts.core.deliveryStore,
      engagement: opts.core.engagement,
      fanout: opts.core.fanout,
      imports: opts.core.imports,
      enrolmentStore: opts.core.enrolmentStore,
      dispatcher: opts.core.dispatcher,
      sendEnrolments: opts.core.sendEnrolments,
      warmup: opts.core.warmup,
      feedbackGuard: opts.core.feedbackGuard,
      delivery: opts.core.delivery(transport),
      tlsReports: opts.core.tlsReports(transport, tls),
      mtaSts: opts.core.mtaSts,
    }),
    ...(bundle ? { workflowBundle: bundle } : { workflowsPath: WORKFLOWS_PATH }),
    interceptors: {
      activity: [logScopeInterceptor, ...(opts.tracing?.worker.activityInterceptors ?? [])],
      ...(bundle ? {} : { workflowModules: [WORKFLOW_INTERCEPTORS] }),
    },
    ...(opts.tracing ? { sinks: opts.tracing.worker.sinks } : {}),
    maxConcurrentActivityTaskExecutions: 200,
    maxConcurrentWorkflowTaskExecutions: 200,
    maxCachedWorkflows: 1000,
    // SIGTERM drains: in-flight tasks get this long to finish (a batch's sends, recorded as they go) before
    // they are cancelled; another worker on the task queue takes over what is left. Under the 20 s that
    // scripts/split-deployment.sh and compose (stop_grace_period) give a role before SIGKILL.
    shutdownGraceTime: '15s',
  });
  const done = worker.run().finally(async () => {
    transport.close();
    await tls.close();
    await egress.close();
    await connection.close();
  });
  return {
    worker,
    done,
    async shutdown() {
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await done;
    },
  };
}
