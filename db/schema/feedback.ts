import { bigint, boolean, index, integer, jsonb, pgTable, primaryKey, text, uniqueIndex } from 'drizzle-orm/pg-core';
import { ms } from './columns.js';

/**
 * What the receiving side reports back (docs/feedback.md): DMARC aggregate reports and TLS reports
 * received at SERVICE_DOMAIN's report addresses, the TLS outcome of every outbound session (for the
 * reports the platform sends), and the activity counters the overview charts read.
 */

/** One DMARC aggregate report (RFC 7489 appendix C) as received for one domain row; a report sent twice is kept once. */
export const dmarcReports = pgTable(
  'dmarc_reports',
  {
    id: text('id').primaryKey(),
    userId: text('user_id').notNull(),
    domainId: text('domain_id').notNull(),
    /** `report_metadata/org_name`. */
    reporter: text('reporter').notNull(),
    reporterEmail: text('reporter_email'),
    reportId: text('report_id').notNull(),
    beginAt: ms('begin_at').notNull(),
    endAt: ms('end_at').notNull(),
    /** The policy the reporter saw published (`policy_published`): p, sp, pct, adkim, aspf. */
    policy: jsonb('policy').$type<Record<string, string>>(),
    /** Records kept, and the messages they count. */
    records: integer('records').notNull(),
    messages: bigint('messages', { mode: 'number' }).notNull(),
    /** Set when the report held more records than the parser keeps (DMARC_MAX_RECORDS). */
    truncated: boolean('truncated').notNull().default(false),
    receivedAt: ms('received_at').notNull(),
  },
  (t) => [
    uniqueIndex('dmarc_reports_uq').on(t.domainId, t.reporter, t.reportId),
    index('dmarc_reports_domain_idx').on(t.domainId, t.beginAt),
  ],
);

/** The rows of a DMARC report: per source IP and header From, the count, the disposition applied and the alignment. */
export const dmarcRows = pgTable(
  'dmarc_rows',
  {
    reportId: text('report_id').notNull(),
    idx: integer('idx').notNull(),
    userId: text('user_id').notNull(),
    domainId: text('domain_id').notNull(),
    reporter: text('reporter').notNull(),
    /** The UTC day (its first ms) of the report's begin date. */
    day: ms('day').notNull(),
    sourceIp: text('source_ip').notNull(),
    headerFrom: text('header_from').notNull(),
    count: bigint('count', { mode: 'number' }).notNull(),
    /** `none`, `quarantine` or `reject`: what the receiver did. */
    disposition: text('disposition').notNull(),
    /** `policy_evaluated`: whether DKIM and SPF passed aligned with the header From. */
    dkimAligned: boolean('dkim_aligned').notNull(),
    spfAligned: boolean('spf_aligned').notNull(),
    /** The raw authentication results (`auth_results`), at most a few entries each. */
    authResults: jsonb('auth_results').$type<Record<string, unknown>>(),
  },
  (t) => [primaryKey({ columns: [t.reportId, t.idx] }), index('dmarc_rows_domain_day_idx').on(t.domainId, t.day)],
);

/** One TLS report (RFC 8460) received for one domain row. `policies` keeps each policy's summary and failure details. */
export const tlsReports = pgTable(
  'tls_reports',
  {
    id: text('id').primaryKey(),
    userId: text('user_id').notNull(),
    domainId: text('domain_id').notNull(),
    reporter: text('reporter').notNull(),
    reporterContact: text('reporter_contact'),
    reportId: text('report_id').notNull(),
    beginAt: ms('begin_at').notNull(),
    endAt: ms('end_at').notNull(),
    success: bigint('success', { mode: 'number' }).notNull(),
    failure: bigint('failure', { mode: 'number' }).notNull(),
    policies: jsonb('policies').$type<Record<string, unknown>[]>().notNull(),
    truncated: boolean('truncated').notNull().default(false),
    receivedAt: ms('received_at').notNull(),
  },
  (t) => [
    uniqueIndex('tls_reports_uq').on(t.domainId, t.reporter, t.reportId),
    index('tls_reports_domain_idx').on(t.domainId, t.beginAt),
  ],
);

/**
 * The TLS outcome of outbound SMTP sessions, counted per recipient policy domain, report period, MX host and
 * result (`success`, or an RFC 8460 result type such as `starttls-not-supported`); read by the daily report.
 */
export const tlsOutcomes = pgTable(
  'tls_outcomes',
  {
    policyDomain: text('policy_domain').notNull(),
    /** The start (ms) of the report period the sessions fell in (TLS_REPORT_PERIOD). */
    periodStart: ms('period_start').notNull(),
    mxHost: text('mx_host').notNull(),
    receivingIp: text('receiving_ip').notNull().default(''),
    sendingIp: text('sending_ip').notNull().default(''),
    /** `sts`, `tlsa` or `no-policy-found` (RFC 8460 policy-type). */
    policyType: text('policy_type').notNull().default('no-policy-found'),
    result: text('result').notNull(),
    count: bigint('count', { mode: 'number' }).notNull().default(0),
  },
  (t) => [primaryKey({ columns: [t.policyDomain, t.periodStart, t.mxHost, t.receivingIp, t.result] })],
);

/** The TLS reports the platform sent (or found no `rua` for), one per policy domain and period: sending is idempotent. */
export const tlsReportSends = pgTable(
  'tls_report_sends',
  {
    policyDomain: text('policy_domain').notNull(),
    periodStart: ms('period_start').notNull(),
    reportId: text('report_id').notNull(),
    /** `sent`, `no_rua` (the domain publishes none), `failed` (every rua refused it; the error says why). */
    status: text('status').notNull(),
    destinations: jsonb('destinations').$type<string[]>(),
    error: text('error'),
    at: ms('at').notNull(),
  },
  (t) => [primaryKey({ columns: [t.policyDomain, t.periodStart] })],
);

/**
 * Mail activity per account, domain (`''` for none) and hour, kept as mail flows by statement triggers on
 * `messages` and `events` (migration 0022), never by scanning messages: `metric` is sent, delivered,
 * deferred, bounced, complained, opened or clicked; `detail` the bounce class of `bounced` (else '').
 */
export const activityCounters = pgTable(
  'activity_counters',
  {
    userId: text('user_id').notNull(),
    domainId: text('domain_id').notNull(),
    hour: ms('hour').notNull(),
    metric: text('metric').notNull(),
    detail: text('detail').notNull().default(''),
    count: bigint('count', { mode: 'number' }).notNull().default(0),
  },
  (t) => [primaryKey({ columns: [t.userId, t.domainId, t.hour, t.metric, t.detail] })],
);
