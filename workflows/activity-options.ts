import type { ActivityOptions } from '@temporalio/workflow';

/**
 * Retry policies in one place (DESIGN.md, Delivery semantics): infrastructure errors (database, network)
 * are retried without a count limit at a capped interval; errors retrying cannot fix arrive as
 * non-retryable failures (activities/failures.ts) and stop at once.
 */
export const UNLIMITED_RETRY: ActivityOptions['retry'] = {
  initialInterval: '1 second',
  backoffCoefficient: 2,
  maximumInterval: '1 minute',
};

/** Heartbeat timeout of activities that do irreversible work item by item (they beat at least every 5 s). */
export const HEARTBEAT_TIMEOUT = '30 seconds';

/** A start-to-close long enough for `items` at `lanes` at once, each taking up to `perItemMs` (SMTP: connect + greeting + DATA). */
export function sizedTimeoutMs(items: number, lanes: number, perItemMs: number): number {
  return Math.max(120_000, Math.ceil(Math.max(1, items) / lanes) * perItemMs + 60_000);
}
