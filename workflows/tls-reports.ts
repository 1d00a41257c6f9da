import { ActivityFailure, ApplicationFailure, proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import type { TlsReportsResult } from '../core/feedback/tls-report-send.js';
import { HEARTBEAT_TIMEOUT, UNLIMITED_RETRY } from './activity-options.js';

const db = proxyActivities<Activities>({ startToCloseTimeout: '1 minute', retry: UNLIMITED_RETRY });
// A receiver that keeps failing gets a few tries, then the report is recorded as failed.
const delivery = proxyActivities<Activities>({
  startToCloseTimeout: '5 minutes',
  heartbeatTimeout: HEARTBEAT_TIMEOUT,
  retry: { initialInterval: '5 seconds', backoffCoefficient: 2, maximumInterval: '5 minutes', maximumAttempts: 5 },
});

export type TlsReportsInput = { includeCurrent?: boolean };

/**
 * The RFC 8460 reports owed (`tls-reports-<task queue>` on its schedule, once per TLS_REPORT_PERIOD; an
 * operator's run includes the current period): each (policy domain, period) with counted sessions and
 * no report yet is sent to its rua and recorded. Idempotent: a recorded pair is never listed again.
 */
export async function tlsReportsWorkflow(input: TlsReportsInput = {}): Promise<TlsReportsResult> {
  const pending = await db.listPendingTlsReports({ includeCurrent: input.includeCurrent ?? false });
  const reports: TlsReportsResult['reports'] = [];
  for (const key of pending) {
    let outcome;
    try {
      outcome = await delivery.sendTlsReport(key);
    } catch (err) {
      const cause = err instanceof ActivityFailure ? err.cause : err;
      const error = cause instanceof ApplicationFailure ? cause.message : String(cause);
      outcome = await db.recordTlsReportFailure({ ...key, error });
    }
    reports.push({
      policy_domain: outcome.policyDomain,
      period_start: outcome.periodStart,
      status: outcome.status,
      destinations: outcome.destinations,
    });
  }
  return { reports };
}
