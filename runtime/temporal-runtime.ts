import { DefaultLogger, Runtime, type LogEntry, type LogLevel } from '@temporalio/worker';
import type { Config } from '../core/config.js';
import { log } from '../core/log.js';

const LEVELS: Record<LogLevel, 'debug' | 'info' | 'warn' | 'error'> = {
  TRACE: 'debug',
  DEBUG: 'debug',
  INFO: 'info',
  WARN: 'warn',
  ERROR: 'error',
};
const TEMPORAL_LEVEL = { debug: 'DEBUG', info: 'INFO', warn: 'WARN', error: 'ERROR' } as const;

/**
 * Installs the Temporal SDK's runtime once per process, before any worker connects: its log lines
 * (worker, activity and workflow loggers, with workflowId and runId) go to the service's JSON log, and its
 * own Prometheus exporter listens on TEMPORAL_METRICS_PORT (task slots, schedule-to-start latency, sticky cache).
 */
export function installTemporalRuntime(config: Config): void {
  const port = config.temporalMetricsPort;
  const forward = (entry: LogEntry) => log[LEVELS[entry.level]]({ ...entry.meta }, entry.message);
  Runtime.install({
    logger: new DefaultLogger(TEMPORAL_LEVEL[config.logLevel], forward),
    ...(port !== undefined
      ? { telemetryOptions: { metrics: { prometheus: { bindAddress: `0.0.0.0:${port}` } } } }
      : {}),
  });
}
