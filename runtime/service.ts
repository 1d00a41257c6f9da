import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { WorkerOptions } from '@temporalio/worker';
import type { SMTPServer } from 'smtp-server';
import { createApp } from '../api/app.js';
import { ConfigError, loadConfig, type Config } from '../core/config.js';
import { createCore, type Core } from '../core/index.js';
import { openDatabase } from '../db/index.js';
import { startDnsServer } from '../dns/server.js';
import { startImap } from '../smtp/imap/server.js';
import { createSmtpServer, listenSmtp } from '../smtp/server.js';
import { describeError, logError } from '../core/log.js';
import { connectTemporal, createWorkflowPort } from '../temporal/client.js';
import { startDevServer, type DevServer } from '../temporal/dev-server.js';
import { ensureSchedules } from '../temporal/schedules.js';
import { prepareSearchAttributes } from '../temporal/search-attribute-setup.js';
// Type-only: worker.ts is also an entry point that imports this module, so the worker is handed in (no import cycle).
import type { RunningWorker, startWorker } from '../worker.js';

export type StartWorker = typeof startWorker;

export type Role = 'api' | 'smtp' | 'imap' | 'worker';
export const ALL_ROLES: Role[] = ['api', 'smtp', 'imap', 'worker'];

export type Service = {
  core: Core;
  apiPort?: number;
  smtpPort?: number;
  imapPort?: number;
  imapsPort?: number;
  dnsPort?: number;
  temporalAddress: string;
  worker?: RunningWorker;
  stop(): Promise<void>;
};

/**
 * Boots the requested roles in this process against one database and one Temporal server. Without
 * TEMPORAL_ADDRESS it starts the Temporal dev server (state in DATA_DIR, UI on TEMPORAL_UI_PORT) and stops it on exit.
 */
export async function startService(config: Config, roles: Role[], opts: { startWorker?: StartWorker; workflowBundle?: WorkerOptions['workflowBundle']; log?: (m: string) => void } = {}): Promise<Service> {
  const log = opts.log ?? ((m: string) => console.log(m));
  const cleanups: (() => Promise<void>)[] = [];
  const stop = async () => {
    for (const fn of cleanups.reverse()) await fn().catch((err) => logError('[shutdown]', err));
  };
  try {
    let address = config.temporal.address;
    let devServer: DevServer | undefined;
    if (!address) {
      log(`[temporal] starting dev server on 127.0.0.1:${config.temporal.devPort} (UI http://localhost:${config.temporal.uiPort})`);
      devServer = await startDevServer({
        port: config.temporal.devPort, uiPort: config.temporal.uiPort, namespace: config.temporal.namespace,
        dbFile: join(config.dataDir, 'temporal.db'),
      });
      cleanups.push(() => devServer!.stop());
      address = devServer.address;
    }
    const database = await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir });
    cleanups.push(() => database.close());
    log(`[db] ${database.kind === 'postgres' ? 'PostgreSQL' : `embedded PGlite in ${config.dataDir}`} ready, migrations applied`);
    const temporal = await connectTemporal({ address, namespace: config.temporal.namespace, taskQueue: config.temporal.taskQueue });
    cleanups.push(() => temporal.connection.close());
    // Before any role serves: a workflow start naming an attribute the server cannot resolve yet fails.
    if (!devServer) await prepareSearchAttributes(temporal, { database, log, address });
    const core = createCore({ database, config, workflows: createWorkflowPort(temporal, config) });
    cleanups.push(() => core.close());
    // First boot creates the service domain's DKIM key (idempotent; roles starting together agree on one key).
    await core.serviceDomain.ensure();
    const service: Service = { core, temporalAddress: address, stop };

    if (roles.includes('worker')) {
      if (!opts.startWorker) throw new Error('the worker role needs startWorker (from worker.ts)');
      service.worker = await opts.startWorker({ core, address, workflowBundle: opts.workflowBundle });
      cleanups.push(() => service.worker!.shutdown());
      await ensureSchedules(temporal, { retrySchedule: config.outboundRetrySchedule });
      log(`[worker] polling task queue ${config.temporal.taskQueue}`);
    }
    if (roles.includes('smtp')) {
      const smtp: SMTPServer = createSmtpServer(core);
      service.smtpPort = await listenSmtp(smtp, config.smtpPort);
      cleanups.push(() => new Promise<void>((resolve) => smtp.close(() => resolve())));
      log(`[smtp] inbound SMTP on port ${service.smtpPort}`);
    }
    if (roles.includes('imap')) {
      const imap = await startImap(core, { port: config.imap.port, tlsPort: config.imap.tlsPort });
      service.imapPort = imap.port;
      service.imapsPort = imap.tlsPort;
      cleanups.push(() => imap.close());
      log(`[imap] IMAP on port ${imap.port} (STARTTLS), IMAPS on port ${imap.tlsPort}`);
    }
    if (roles.includes('api') && config.dnsPort !== undefined) {
      const dns = await startDnsServer({ port: config.dnsPort, host: '0.0.0.0', lookup: (name, type) => core.hosted.lookup(name, type) });
      service.dnsPort = dns.port;
      cleanups.push(() => dns.close());
      log(`[dns] authoritative for ${config.serviceDomain} and hosted domains on port ${dns.port} (UDP and TCP)`);
    }
    if (roles.includes('api')) {
      const server: Server = createApp(core).listen(config.port);
      await new Promise<void>((resolve, reject) => server.once('listening', resolve).once('error', reject));
      service.apiPort = (server.address() as AddressInfo).port;
      cleanups.push(() => new Promise<void>((resolve) => { server.close(() => resolve()); server.closeAllConnections(); }));
      log(`[api] listening on ${config.publicUrl} (port ${service.apiPort})`);
    }
    return service;
  } catch (err) {
    await stop();
    throw err;
  }
}

/** CLI entry: parse config, start roles, stop cleanly on SIGINT/SIGTERM. */
export async function runRoles(roles: Role[], startWorker?: StartWorker): Promise<void> {
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
  if (roles.length < ALL_ROLES.length && !config.databaseUrl) {
    console.error('Running one role alone needs a shared database: set DATABASE_URL (embedded PGlite serves one process only).');
    process.exit(2);
  }
  if (roles.length < ALL_ROLES.length && !config.temporal.address) {
    console.error('Running one role alone needs a shared Temporal server: set TEMPORAL_ADDRESS (host:port).');
    process.exit(2);
  }
  let service: Service;
  try {
    service = await startService(config, roles, { startWorker });
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
  if (service.worker) service.worker.done.catch((err) => { logError('[worker] stopped', err); void shutdown('worker failure'); });
}
