/**
 * What the aggregate-report parsers answer (core/parsing/dmarc.ts, core/parsing/tls-report.ts): plain,
 * structured-cloneable values, bounded by the parser (DMARC_MAX_RECORDS records, REPORT_MAX_BYTES once
 * decompressed). Times are ms epoch; addresses and domains are lower-cased.
 */

export type DmarcAuthResult = { domain: string; result: string; selector?: string; scope?: string };

export type DmarcRecord = {
  sourceIp: string;
  count: number;
  /** `policy_evaluated/disposition`: none, quarantine or reject. */
  disposition: string;
  /** `policy_evaluated/dkim` and `/spf` are `pass`: aligned with the header From. */
  dkimAligned: boolean;
  spfAligned: boolean;
  headerFrom: string;
  envelopeFrom: string | null;
  /** `auth_results`: at most 8 entries each. */
  dkim: DmarcAuthResult[];
  spf: DmarcAuthResult[];
};

export type DmarcReport = {
  kind: 'dmarc';
  /** `report_metadata/org_name`. */
  reporter: string;
  reporterEmail: string | null;
  reportId: string;
  beginAt: number;
  endAt: number;
  /** `policy_published/domain`. */
  policyDomain: string;
  /** `policy_published`'s other fields as strings (p, sp, pct, adkim, aspf, np, fo…). */
  policy: Record<string, string>;
  records: DmarcRecord[];
  /** More records than the parser keeps: the first ones are kept. */
  truncated: boolean;
};

export type TlsFailureDetail = {
  resultType: string;
  sendingMtaIp: string | null;
  receivingMxHostname: string | null;
  receivingIp: string | null;
  failedSessions: number;
  additionalInformation: string | null;
  failureReasonCode: string | null;
};

export type TlsPolicyResult = {
  /** `sts`, `tlsa` or `no-policy-found`. */
  policyType: string;
  policyDomain: string;
  policyStrings: string[];
  mxHosts: string[];
  success: number;
  failure: number;
  failures: TlsFailureDetail[];
};

export type TlsReport = {
  kind: 'tls';
  /** `organization-name`. */
  reporter: string;
  contact: string | null;
  reportId: string;
  beginAt: number;
  endAt: number;
  policies: TlsPolicyResult[];
  truncated: boolean;
};

/**
 * A parse's answer: the report, or why the mail was refused as a report (`reason`, for the log and the
 * metric): not a report, an archive past its bounds, XML that is not well formed, a DOCTYPE.
 */
export type AggregateParse<R> = { report: R } | { report: null; reason: string };
export type AggregateBounds = { maxBytes: number; maxRecords: number };
