import { sql } from 'drizzle-orm';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Db } from '../db/index.js';

/**
 * The service's Prometheus metrics (docs/operations.md lists them): one registry per process, served by
 * GET /metrics on the API and on METRICS_PORT for the other roles. Counters are process totals; sum them
 * over instances. Queue depth is read from PostgreSQL on each scrape, so every role reports the same
 * number: take `max` over instances.
 */
export const registry = new Registry();
collectDefaultMetrics({ register: registry });

const SECONDS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

export const messagesAccepted = new Counter({
  name: 'svc_messages_accepted_total',
  help: 'Messages accepted: API sends (source=api), SMTP submission (source=submission) and inbound SMTP messages (source=smtp)',
  labelNames: ['source'] as const,
  registers: [registry],
});
export const acceptDuration = new Histogram({
  name: 'svc_accept_duration_seconds',
  help: 'Time from request to acceptance: a send call (api), a submitted message (submission) or an inbound SMTP DATA (smtp)',
  labelNames: ['source'] as const,
  buckets: SECONDS,
  registers: [registry],
});
export const recipientOutcomes = new Counter({
  name: 'svc_recipient_outcomes_total',
  help: 'Outcomes of outbound recipients per SMTP transaction, by result (sent, deferred, bounced, throttled) and site (MX host set; the recipient domain when not delivering by MX)',
  labelNames: ['result', 'site'] as const,
  registers: [registry],
});
export const deliverDuration = new Histogram({
  name: 'svc_deliver_duration_seconds',
  help: 'Duration of one outbound SMTP transaction, by its outcome (sent, deferred, bounced, mixed)',
  labelNames: ['result'] as const,
  buckets: SECONDS,
  registers: [registry],
});
export const webhookAttempts = new Counter({
  name: 'svc_webhook_attempts_total',
  help: 'Webhook POST attempts by result (ok, http_4xx, http_5xx, timeout, network, redirect, no-ack)',
  labelNames: ['result'] as const,
  registers: [registry],
});
export const webhookDuration = new Histogram({
  name: 'svc_webhook_duration_seconds',
  help: 'Duration of one webhook POST, by result',
  labelNames: ['result'] as const,
  buckets: SECONDS,
  registers: [registry],
});
export const spamScans = new Counter({
  name: 'svc_spam_scans_total',
  help: "Inbound messages scanned by rspamd, by result: rspamd's action when scored, or unscored with its reason (timeout, unreachable, bad_answer, too_large, not_configured)",
  labelNames: ['result', 'action', 'reason'] as const,
  registers: [registry],
});
export const spamScanDuration = new Histogram({
  name: 'svc_spam_scan_duration_seconds',
  help: 'One rspamd scan of an inbound message at DATA, by result (scored, unscored)',
  labelNames: ['result'] as const,
  buckets: SECONDS,
  registers: [registry],
});
export const inboundPolicyOutcomes = new Counter({
  name: 'svc_inbound_policy_outcomes_total',
  help: "Inbound messages judged by a domain's policy at DATA: delivered, held (quarantine), refused (spam score or DMARC p=reject) or blocked (a sender rule)",
  labelNames: ['outcome'] as const,
  registers: [registry],
});
export const rateLimitRefusals = new Counter({
  name: 'svc_rate_limit_refusals_total',
  help: 'Requests refused by a rate limit or cap (HTTP 429), by error code',
  labelNames: ['code'] as const,
  registers: [registry],
});
/** DMARC aggregate and TLS reports mailed to SERVICE_DOMAIN (docs/feedback.md), by what became of them. */
export const reportsReceived = new Counter({
  name: 'svc_reports_received_total',
  help: 'DMARC and TLS reports received, by kind (dmarc, tls) and outcome (stored, duplicate, unknown_domain, over_daily_cap, refused)',
  labelNames: ['kind', 'outcome'] as const,
  registers: [registry],
});

/** Outbound SMTP sessions by their TLS outcome (RFC 8460 result types and success; docs/tls-reporting.md). */
export const tlsSessions = new Counter({
  name: 'svc_tls_sessions_total',
  help: 'Outbound SMTP sessions (OUTBOUND_MODE=mx) by TLS result: success, starttls-not-supported, certificate-host-mismatch, certificate-expired, certificate-not-trusted, validation-failure',
  labelNames: ['result'] as const,
  registers: [registry],
});
/** TLS reports the platform sent, by status (sent, no_rua, failed). */
export const tlsReportsSent = new Counter({
  name: 'svc_tls_reports_sent_total',
  help: 'RFC 8460 TLS reports settled per policy domain and period, by status (sent, no_rua, failed)',
  labelNames: ['status'] as const,
  registers: [registry],
});

export const parseTasksOverBudget = new Counter({
  name: 'svc_parse_tasks_over_budget_total',
  help: 'Parse pool tasks ended and refused for passing their budget, by task and budget (time, memory)',
  labelNames: ['task', 'budget'] as const,
  registers: [registry],
});
export const parseThreadErrors = new Counter({
  name: 'svc_parse_thread_errors_total',
  help: 'Parse pool threads that failed with no task of their own (a memory limit reached as its task was ended), by error code',
  labelNames: ['code'] as const,
  registers: [registry],
});
export const parseTaskDuration = new Histogram({
  name: 'svc_parse_task_duration_seconds',
  help: 'Time of one parse pool task from hand-in to answer (queue wait included), by task',
  labelNames: ['task'] as const,
  buckets: SECONDS,
  registers: [registry],
});
export const inboundAcceptsWaiting = new Gauge({
  name: 'svc_inbound_accepts_waiting',
  help: 'Inbound messages waiting for the accepting transaction under way (they share the next one)',
  registers: [registry],
});
export const imapSessions = new Gauge({
  name: 'svc_imap_sessions',
  help: 'IMAP connections open now',
  registers: [registry],
});
export const imapSessionsOpened = new Counter({
  name: 'svc_imap_sessions_opened_total',
  help: 'IMAP connections accepted',
  registers: [registry],
});

export const complaints = new Counter({
  name: 'svc_complaints_total',
  help: 'Spam complaints (ARF feedback reports) applied to an outbound message, by feedback type (abuse, fraud, virus, auth-failure, other)',
  labelNames: ['feedback_type'] as const,
  registers: [registry],
});
export const bounces = new Counter({
  name: 'svc_bounces_total',
  help: 'Bounced recipients: refused in the SMTP transaction (kind=sync) or reported later by a DSN (kind=async), by bounce class',
  labelNames: ['kind', 'class'] as const,
  registers: [registry],
});
/** RFC 5965 and RFC 6591 feedback types; anything else a report names counts as `other`. */
const FEEDBACK_TYPES = new Set(['abuse', 'fraud', 'virus', 'auth-failure', 'other']);
export const countComplaint = (feedbackType: string): void =>
  complaints.inc({ feedback_type: FEEDBACK_TYPES.has(feedbackType) ? feedbackType : 'other' });
/** Bounce classes come from bounce-rules.toml and an operator's file: bounded, and past MAX_CLASSES counted as `other`. */
const MAX_CLASSES = 32;
const classes = new Set<string>();
export function countBounce(kind: 'sync' | 'async', bounceClass: string | undefined): void {
  const label = bounceClass && (classes.has(bounceClass) || classes.size < MAX_CLASSES) ? bounceClass : 'other';
  classes.add(label);
  bounces.inc({ kind, class: label });
}

/** Distinct sites kept as label values; past it they count as `other` (a label per domain must stay bounded). */
const MAX_SITES = 200;
const sites = new Set<string>();
/**
 * The site label: the shaping site the transaction went to (its MX host set, so every Google Workspace
 * domain counts as one site) when the transport knows it, else the recipient's domain; lowercased and
 * bounded to MAX_SITES distinct values per process.
 */
export function siteOf(address: string, site?: string): string {
  const label = (site ?? address.slice(address.lastIndexOf('@') + 1)).toLowerCase();
  if (sites.has(label)) return label;
  if (sites.size >= MAX_SITES || !label) return 'other';
  sites.add(label);
  return label;
}

/** Seconds since `startedAt` (a performance.now() reading). */
export const since = (startedAt: number) => (performance.now() - startedAt) / 1000;

const QUEUE_STATES = ['queued', 'sending', 'deferred', 'scheduled'];
let queueSource: Db | undefined;
new Gauge({
  name: 'svc_queue_depth',
  help: 'Messages waiting, by state (queued, sending, deferred, scheduled): read from PostgreSQL on each scrape',
  labelNames: ['state'] as const,
  registers: [registry],
  async collect() {
    if (!queueSource) return;
    this.reset();
    // One index range scan of messages_status_idx over the states still in flight.
    const rows = await queueSource.execute(
      sql`select status, count(*)::int as n from messages where status in ('queued', 'sending', 'deferred', 'scheduled') group by status`,
    );
    const counts = new Map(
      (rows as unknown as { rows: { status: string; n: number }[] }).rows.map((r) => [r.status, Number(r.n)]),
    );
    for (const state of QUEUE_STATES) this.set({ state }, counts.get(state) ?? 0);
  },
});
/** Where the queue depth gauge reads from (the role's database); answers a function that stops it. */
export function collectQueueDepth(db: Db): () => void {
  queueSource = db;
  return () => {
    if (queueSource === db) queueSource = undefined;
  };
}
export const bulkPaused = new Counter({
  name: 'svc_domains_bulk_paused_total',
  help: "Sending domains whose bulk mail (broadcasts, sequences) the complaint guard paused (no domain label: see the domain's feedback)",
  registers: [registry],
});

/**
 * Outbound recipients by the egress source and pool their transaction left from (egress.toml) and result
 * (sent, deferred, bounced). No label names a domain or an account; source and pool names come from the
 * operator's file, and past MAX_EGRESS_LABELS distinct values count as `other`. Capture mode (no source) is not counted.
 */
export const egressResults = new Counter({
  name: 'svc_egress_results_total',
  help: 'Outbound recipients by egress source, pool (egress.toml) and result (sent, deferred, bounced)',
  labelNames: ['source', 'pool', 'result'] as const,
  registers: [registry],
});
const MAX_EGRESS_LABELS = 64;
const egressLabels = new Set<string>();
/** A source or pool name as a label value, bounded to MAX_EGRESS_LABELS distinct values per process. */
export function egressLabel(name: string): string {
  if (egressLabels.has(name)) return name;
  if (egressLabels.size >= MAX_EGRESS_LABELS) return 'other';
  egressLabels.add(name);
  return name;
}
