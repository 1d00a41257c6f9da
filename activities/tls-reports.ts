import type { TlsReportKey, TlsReportSender } from '../core/feedback/tls-report-send.js';
import { withProgress } from './progress.js';

/** TLS report sending (docs/tls-reporting.md). */
export function tlsReportActivities(deps: { tlsReports: TlsReportSender }) {
  return {
    /** Writes this worker's session counts, then lists the (domain, period) pairs owed a report. Read-only otherwise. */
    listPendingTlsReports: (input: { includeCurrent: boolean }) => deps.tlsReports.pending(input),
    /** Looks up the domain's rua and delivers its report to each; idempotent once recorded (a retry before that sends again). */
    sendTlsReport: (key: TlsReportKey) => withProgress((p) => deps.tlsReports.send(key, p.beat)),
    /** Records a report no rua took once its retries are spent (the first record stands). */
    recordTlsReportFailure: (input: TlsReportKey & { error: string }) =>
      deps.tlsReports.fail({ policyDomain: input.policyDomain, periodStart: input.periodStart }, input.error),
  };
}
