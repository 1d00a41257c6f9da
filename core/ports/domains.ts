/** The DNS verification loop of a domain. */
export type VerificationWorkflows = {
  /** Starts the DNS verification loop of a domain (starting twice is success). */
  startDomainVerification(d: { domainId: string; userId: string; domain: string }): Promise<void>;
  /** Asks a running verification loop to check again now. */
  nudgeDomainVerification(domainId: string): Promise<void>;
  /** Stops a domain's verification loop (none running is fine). */
  stopDomainVerification(domainId: string): Promise<void>;
};

/** The DKIM key rotation of a domain (docs/domains.md). */
export type DkimRotationWorkflows = {
  /** Starts the DKIM key rotation of a domain; false when one is already running. */
  startDkimRotation(domainId: string): Promise<boolean>;
  /** Asks a rotation waiting for its record to look again now (no rotation running is fine). */
  nudgeDkimRotation(domainId: string): Promise<void>;
};

/** The warm-up plan of a domain (`warmup-<id>`). */
export type WarmupWorkflows = {
  /** Starts the warm-up plan workflow of a domain. */
  startWarmup(w: { domainId: string; userId: string; days: number; dayMs: number }): Promise<void>;
  /** Terminates a domain's warm-up workflow (none running is fine). */
  stopWarmup(domainId: string): Promise<void>;
};

/** The complaint guard of a domain (`domain-guard-<id>`, docs/deliverability.md). */
export type GuardWorkflows = {
  /** Complaints or bounces were recorded for the domain: signals its guard, starting it when none runs. */
  signalDomainGuard(domainId: string, userId: string): Promise<void>;
  /** The domain's bulk mail was resumed: tells its guard (starting one, which remembers the resume). */
  resumeDomainGuard(domainId: string, userId: string): Promise<void>;
  /** Wakes a broadcast waiting for its domain's pause to end (no run open is fine). */
  wakeBroadcast(broadcastId: string): Promise<void>;
};

/** The workflows of domains: verification, DKIM rotation, warm-up and the complaint guard. */
export type DomainWorkflows = VerificationWorkflows & DkimRotationWorkflows & WarmupWorkflows & GuardWorkflows;
