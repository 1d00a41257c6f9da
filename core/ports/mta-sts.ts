/** The MTA-STS policy fetch of a recipient domain (`mta-sts-<domain>`, docs/mta-sts.md). */
export type MtaStsWorkflows = {
  /** Starts the fetch of a domain's policy; one already running makes this a no-op, a finished one runs again. */
  startMtaStsFetch(domain: string): Promise<void>;
};
