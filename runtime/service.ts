import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { WorkerOptions } from '@temporalio/worker';
import type { SMTPServer } from 'smtp-server';
import { createApp } from '../api/app.js';
import { ConfigError, loadConfig, type Config } from '../core/config.js';
import { createCore, servicesOf, type Composition } from '../core/index.js';
import { openDatabase } from '../db/index.js';
import { startDnsServer } from '../dns/server.js';
import { startImap } from '../smtp/imap/server.js';
import { createSmtpServer, listenSmtp } from '../smtp/server.js';
import { createSmtpGuard } from '../smtp/limits.js';
import { createSubmissionServer, listenImplicitTls } from '../smtp/submission.js';
import { captureConsole, configureLogging, describeError, log, logError } from '../core/log.js';
import { collectQueueDepth } from '../core/metrics.js';
import { startMetricsServer } from './metrics-server.js';
import { rspamdBinary, startLocalRspamd, type LocalRspamd } from './rspamd.js';
import { installTemporalRuntime } from './temporal-runtime.js';
import { connectTemporal, createWorkflowPort } from '../temporal/client.js';
import { startDevServer, type DevServer } from '../temporal/dev-server.js';
import { ensureSchedules } from '../temporal/schedules.js';
import { startTracing } from '../temporal/tracing.js';
import { prepareSearchAttributes } from '../temporal/search-attribute-setup.js';
// The roles start the worker; worker.ts never imports back (`npm run start:worker` is `main.ts worker`).
import { startWorker, type RunningWorker } from '../worker.js';

export type Role = 'api' | 'smtp' | 'submission' | 'imap' | 'worker';
export const ALL_ROLES: Role[] = ['api', 'smtp', 'submission', 'imap', 'worker'];

export type Service = {
  /** The whole composition (the worker's part, the database): the transports get `servicesOf(core)`. */
  core: Composition;
  apiPort?: number;
  /** The API's HTTP server (the abuse suite counts what it reads per connection). */
  apiServer?: Server;
  smtpPort?: number;
  /** Submission: STARTTLS (SUBMISSION_PORT) and implicit TLS (SUBMISSIONS_PORT). */
  submissionPort?: number;
  submissionsPort?: number;
  imapPort?: number;
  imapsPort?: number;
  dnsPort?: number;
  /** METRICS_PORT's GET /metrics, when set. */
  metricsPort?: number;
  temporalAddress: string;
  worker?: RunningWorker;
  stop(): Promise<void>;
};

/**
 * Boots the requested roles in this process against one database and one Temporal server. Without
 * TEMPORAL_ADDRESS it starts the Temporal dev server (state in DATA_DIR, UI on TEMPORAL_UI_PORT) and stops it on exit.
 */
export async function startService(
  config: Config,
  roles: Role[],
  opts: {
    workflowBundle?: WorkerOptions['workflowBundle'];
    log?: (m: string) => void;
    /** `npm start`: without RSPAMD_URL, the SMTP role runs a local rspamd when the binary is on the machine. */
    localRspamd?: boolean;
  } = {},
): Promise<Service> {
  const say = opts.log ?? ((m: string) => log.info(m));
  const cleanups: (() => Promise<void>)[] = [];
  const stop = async () => {
    for (const fn of cleanups.reverse()) await fn().catch((err) => logError('[shutdown]', err));
  };
  try {
    // Started beside the Temporal dev server (rspamd takes a few seconds to load its rules).
    const rspamd = localRspamdFor(config, roles, opts.localRspamd === true, say);
    cleanups.push(async () => (await rspamd)?.stop());
    let address = config.temporal.address;
    let devServer: DevServer | undefined;
    if (!address) {
      say(
        `[temporal] starting dev server on 127.0.0.1:${config.temporal.devPort} (UI http://localhost:${config.temporal.uiPort})`,
      );
      devServer = await startDevServer({
        port: config.temporal.devPort,
        uiPort: config.temporal.uiPort,
        namespace: config.temporal.namespace,
        dbFile: join(config.dataDir, 'temporal.db'),
      });
      cleanups.push(() => devServer!.stop());
      address = devServer.address;
    }
    const database = await openDatabase({
      databaseUrl: config.databaseUrl,
      dataDir: config.dataDir,
      log,
      queryStatsFile: config.queryStatsFile,
    });
    cleanups.push(() => database.close());
    say(
      `[db] ${database.kind === 'postgres' ? 'PostgreSQL' : `embedded PGlite in ${config.dataDir}`} ready, migrations applied`,
    );
    const tracing = await startTracing(config.otlpEndpoint, roles.join('+'));
    if (tracing) cleanups.unshift(() => tracing.shutdown());
    const temporal = await connectTemporal({
      address,
      namespace: config.temporal.namespace,
      taskQueue: config.temporal.taskQueue,
      interceptors: tracing?.clientInterceptors,
    });
    cleanups.push(() => temporal.connection.close());
    // Before any role serves: a workflow start naming an attribute the server cannot resolve yet fails. The
    // dev server registers them from its flags, but keeps an existing DATA_DIR's types (SvcMessageId was a
    // Keyword): preparing retypes it there too, and costs one list and one query when all is in place.
    await prepareSearchAttributes(temporal, { database, log: say, address });
    const local = await rspamd;
    const filtered: Config = local
      ? { ...config, inboundFilter: { ...config.inboundFilter, rspamdUrl: local.url } }
      : config;
    const core = createCore({ database, config: filtered, workflows: createWorkflowPort(temporal, config) });
    cleanups.push(() => core.close());
    // First boot creates the service domain's DKIM key (idempotent; roles starting together agree on one key).
    await core.serviceDomain.ensure();
    // What the transports (SMTP, IMAP, DNS, the API) get: the services, not the database or the workflow port.
    const services = servicesOf(core);
    const service: Service = { core, temporalAddress: address, stop };
    const stopQueueDepth = collectQueueDepth(database.db);
    cleanups.push(async () => stopQueueDepth());
    if (config.metricsPort !== undefined) {
      const metrics = await startMetricsServer(config.metricsPort, config.operatorToken);
      service.metricsPort = metrics.port;
      cleanups.push(() => metrics.close());
      say(`[metrics] GET /metrics on port ${metrics.port}`);
    }

    if (roles.includes('worker')) {
      service.worker = await startWorker({ core, address, workflowBundle: opts.workflowBundle, tracing });
      cleanups.push(() => service.worker!.shutdown());
      await ensureSchedules(temporal, {
        retrySchedule: config.outboundRetrySchedule,
        dkimRotationDays: config.dkimRotation.days,
        tlsReportPeriodMs: config.feedback.tlsReportPeriodMs,
      });
      say(`[worker] polling task queue ${config.temporal.taskQueue}`);
    }
    if (roles.includes('smtp')) {
      const smtp: SMTPServer = createSmtpServer(services);
      service.smtpPort = await listenSmtp(smtp, config.smtpPort);
      cleanups.push(() => new Promise<void>((resolve) => smtp.close(() => resolve())));
      say(`[smtp] inbound SMTP on port ${service.smtpPort}`);
    }
    if (roles.includes('submission')) {
      // One guard for both listeners: a client's connections count together on 587 and 465.
      const { smtp } = config;
      const guard = createSmtpGuard({ maxPerIp: smtp.maxClientsPerIp, commandsPerMinute: smtp.commandsPerMinute });
      const plain = createSubmissionServer(services, { secure: false, guard });
      const secure = createSubmissionServer(services, { secure: true, guard });
      service.submissionPort = await listenSmtp(plain, config.submission.port);
      cleanups.push(() => new Promise<void>((resolve) => plain.close(() => resolve())));
      const implicit = await listenImplicitTls(secure, services, config.submission.tlsPort);
      service.submissionsPort = implicit.port;
      cleanups.push(() => implicit.close());
      say(
        `[submission] SMTP submission on port ${service.submissionPort} (STARTTLS) and ${service.submissionsPort} (implicit TLS)`,
      );
    }
    if (roles.includes('imap')) {
      const imap = await startImap(services, { port: config.imap.port, tlsPort: config.imap.tlsPort });
      service.imapPort = imap.port;
      service.imapsPort = imap.tlsPort;
      cleanups.push(() => imap.close());
      say(`[imap] IMAP on port ${imap.port} (STARTTLS), IMAPS on port ${imap.tlsPort}`);
    }
    if (roles.includes('api') && config.dnsPort !== undefined) {
      const dns = await startDnsServer({
        port: config.dnsPort,
        host: '0.0.0.0',
        lookup: (name, type) => services.hosted.lookup(name, type),
      });
      service.dnsPort = dns.port;
      cleanups.push(() => dns.close());
      say(`[dns] authoritative for ${config.serviceDomain} and hosted domains on port ${dns.port} (UDP and TCP)`);
    }
    if (roles.includes('api')) {
      const server: Server = createApp(services).listen(config.port);
      await new Promise<void>((resolve, reject) => server.once('listening', resolve).once('error', reject));
      service.apiPort = (server.address() as AddressInfo).port;
      service.apiServer = server;
      cleanups.push(
        () =>
          new Promise<void>((resolve) => {
            server.close(() => resolve());
            server.closeAllConnections();
          }),
      );
      say(`[api] listening on ${config.publicUrl} (port ${service.apiPort})`);
    }
    return service;
  } catch (err) {
    await stop();
    throw err;
  }
}

/**
 * The local rspamd of `npm start` (state in DATA_DIR/rspamd), when the SMTP role runs without RSPAMD_URL and
 * the binary is on the machine; otherwise one line says that inbound mail is delivered unscored.
 */
async function localRspamdFor(
  config: Config,
  roles: Role[],
  wanted: boolean,
  say: (m: string) => void,
): Promise<LocalRspamd | undefined> {
  if (!roles.includes('smtp') || config.inboundFilter.rspamdUrl) return undefined;
  const unscored = '[rspamd] no RSPAMD_URL: inbound mail is delivered unscored';
  const binary = wanted ? rspamdBinary() : undefined;
  if (!binary) {
    say(wanted ? `${unscored} (apt-get install rspamd, and npm start runs one)` : unscored);
    return undefined;
  }
  try {
    const local = await startLocalRspamd({ dir: join(config.dataDir, 'rspamd'), binary });
    say(`[rspamd] local rspamd scoring inbound mail on ${local.url} (set RSPAMD_URL to use another)`);
    return local;
  } catch (err) {
    say(`${unscored}: the local rspamd did not start (${describeError(err)})`);
    return undefined;
  }
}

/** CLI entry: parse config, start roles, stop cleanly on SIGINT/SIGTERM. */
export async function runRoles(roles: Role[]): Promise<void> {
  let config: Config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(err.message);
      process.exit(2);
    }
    throw err;
  }
  configureLogging({ level: config.logLevel, role: roles.length === ALL_ROLES.length ? 'all' : roles.join('+') });
  captureConsole();
  if (roles.length < ALL_ROLES.length && !config.databaseUrl) {
    console.error(
      'Running one role alone needs a shared database: set DATABASE_URL (embedded PGlite serves one process only).',
    );
    process.exit(2);
  }
  if (roles.length < ALL_ROLES.length && !config.temporal.address) {
    console.error('Running one role alone needs a shared Temporal server: set TEMPORAL_ADDRESS (host:port).');
    process.exit(2);
  }
  let service: Service;
  try {
    if (roles.includes('worker')) installTemporalRuntime(config);
    service = await startService(config, roles, { localRspamd: true });
  } catch (err) {
    console.error(`Startup failed: ${describeError(err)}`);
    process.exit(1);
  }
  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    console.log(`[svc] ${signal}: shutting down`);
    await service.stop();
    process.exit(0);
  };
  process.on('SIGINT', () => void shutdown('SIGINT'));
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  if (service.worker)
    service.worker.done.catch((err) => {
      logError('[worker] stopped', err);
      void shutdown('worker failure');
    });
}
