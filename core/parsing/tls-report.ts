import type {
  AggregateBounds,
  AggregateParse,
  TlsFailureDetail,
  TlsPolicyResult,
  TlsReport,
} from './aggregate-types.js';
import { cut, reportDocument } from './report-archive.js';
import { ReportRefusal } from './report-refusal.js';

/**
 * An RFC 8460 report mail (JSON, plain or gzip; section 4.4's fields) read into a TlsReport. Pure (runs in
 * the parse pool). The document is parsed only once it is known to fit `bounds.maxBytes`; at most
 * `bounds.maxRecords` policies and failure details are kept in all (`truncated`), strings are cut to 255
 * characters. A report without its id or date range is refused. Never throws for bad input.
 */

/** Most policy strings and MX hosts kept per policy. */
const MAX_LIST = 32;
const MAX_COUNT = 1_000_000_000;
/** Objects and arrays a document may open per kept record before it counts as padded (JSON.parse's memory). */
const NODES_PER_RECORD = 64;
const NODES_BASE = 1_000;

type Node = Record<string, unknown>;

export async function parseTlsReportMail(raw: Buffer, bounds: AggregateBounds): Promise<AggregateParse<TlsReport>> {
  try {
    const json = await reportDocument(raw, 'tls', bounds.maxBytes);
    return { report: readTlsJson(json, bounds.maxRecords) };
  } catch (err) {
    if (err instanceof ReportRefusal) return { report: null, reason: err.reason };
    return { report: null, reason: 'bad_json' };
  }
}

/** The report in a JSON document (exported for the tests of the JSON alone). */
export function readTlsJson(json: string, maxRecords: number): TlsReport {
  if (openings(json) > NODES_BASE + NODES_PER_RECORD * maxRecords) throw new ReportRefusal('too_many_elements');
  let doc: unknown;
  try {
    doc = JSON.parse(json);
  } catch {
    throw new ReportRefusal('bad_json');
  }
  const top = node(doc);
  if (!top) throw new ReportRefusal('bad_json');
  const range = node(top['date-range']) ?? {};
  const reportId = text(top['report-id']);
  const beginAt = time(range['start-datetime']);
  const endAt = time(range['end-datetime']);
  if (!reportId || beginAt === null || endAt === null) throw new ReportRefusal('missing_fields');
  // Policies and failure details share one budget: a report of many policies or of many failures is cut alike.
  let budget = maxRecords;
  let truncated = false;
  const policies: TlsPolicyResult[] = [];
  for (const item of Array.isArray(top.policies) ? top.policies : []) {
    if (budget === 0) {
      truncated = true;
      break;
    }
    const p = node(item);
    const policy = node(p?.policy);
    if (!p || !policy) continue;
    budget -= 1;
    const summary = node(p.summary) ?? {};
    const details = Array.isArray(p['failure-details']) ? p['failure-details'] : [];
    if (details.length > budget) truncated = true;
    const failures = details
      .slice(0, budget)
      .map((d) => failureDetail(node(d)))
      .filter((d): d is TlsFailureDetail => d !== null);
    budget -= Math.min(details.length, budget);
    policies.push({
      policyType: text(policy['policy-type'])?.toLowerCase() ?? 'no-policy-found',
      policyDomain: text(policy['policy-domain'])?.toLowerCase() ?? '',
      policyStrings: strings(policy['policy-string']),
      mxHosts: strings(policy['mx-host']).map((h) => h.toLowerCase()),
      success: count(summary['total-successful-session-count']),
      failure: count(summary['total-failure-session-count']),
      failures,
    });
  }
  return {
    kind: 'tls',
    reporter: text(top['organization-name']) ?? '',
    contact: text(top['contact-info']),
    reportId,
    beginAt,
    endAt,
    policies,
    truncated,
  };
}

/** `{` and `[` in the text (inside strings too: an over-count only makes the bound stricter). */
function openings(json: string): number {
  let n = 0;
  for (let i = 0; i < json.length; i += 1) {
    const c = json.charCodeAt(i);
    if (c === 0x7b || c === 0x5b) n += 1;
  }
  return n;
}

function failureDetail(d: Node | null): TlsFailureDetail | null {
  const resultType = text(d?.['result-type'])?.toLowerCase();
  if (!d || !resultType) return null;
  return {
    resultType,
    sendingMtaIp: text(d['sending-mta-ip']),
    receivingMxHostname: text(d['receiving-mx-hostname'])?.toLowerCase() ?? null,
    receivingIp: text(d['receiving-ip']),
    failedSessions: count(d['failed-session-count']),
    additionalInformation: text(d['additional-information']),
    // RFC 8460's own example (section 4.4) spells it `failure-error-code`.
    failureReasonCode: text(d['failure-reason-code']) ?? text(d['failure-error-code']),
  };
}

const node = (v: unknown): Node | null =>
  v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Node) : null;

/** A string value cut to 255 characters; null when absent, empty or not a string. */
function text(v: unknown): string | null {
  if (typeof v !== 'string') return null;
  const s = cut(v.trim());
  return s === '' ? null : s;
}

function strings(v: unknown): string[] {
  const list = Array.isArray(v) ? v : [];
  return list
    .slice(0, MAX_LIST)
    .map(text)
    .filter((s): s is string => s !== null);
}

/** A session count: a non-negative integer, at most MAX_COUNT; anything else counts 0. */
function count(v: unknown): number {
  return typeof v === 'number' && Number.isInteger(v) && v >= 0 ? Math.min(v, MAX_COUNT) : 0;
}

/** An RFC 3339 date-time as ms epoch. */
function time(v: unknown): number | null {
  const s = text(v);
  const ms = s === null ? NaN : Date.parse(s);
  return Number.isFinite(ms) ? ms : null;
}
