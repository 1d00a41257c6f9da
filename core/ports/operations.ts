/** What a run of the TLS reports answers (core/feedback/tls-report-send.ts): each report and what became of it. */
export type TlsReportsResult = {
  reports: { policy_domain: string; period_start: number; status: string; destinations: string[] }[];
};

/** What the operator's checks ask of Temporal itself (health and `npm run doctor`), and the runs they start. */
export type OperationsWorkflows = {
  /** Runs the TLS report workflow now, the current period included, and answers what it settled. */
  runTlsReportsNow(): Promise<TlsReportsResult>;
  /** Answers when the Temporal server does. */
  ping(): Promise<void>;
  /** How long the namespace keeps closed runs, in ms (the doctor's retention check); null when unset. */
  retentionMs(): Promise<number | null>;
};
