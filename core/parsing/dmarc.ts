import { isIP } from 'node:net';
import { XMLParser, XMLValidator } from 'fast-xml-parser';
import type { AggregateBounds, AggregateParse, DmarcAuthResult, DmarcRecord, DmarcReport } from './aggregate-types.js';
import { cut, reportDocument } from './report-archive.js';
import { ReportRefusal } from './report-refusal.js';
import { scanXml } from './xml-scan.js';

/**
 * A DMARC aggregate report mail (RFC 7489 appendix C, and DMARCbis: namespace
 * urn:ietf:params:xml:ns:dmarc-2.0, `version`, `np`, `discovery_method`, `testing`) read into a DmarcReport.
 * Pure (runs in the parse pool). The XML is scanned before it is parsed (xml-scan.ts): a DOCTYPE is refused,
 * records past `bounds.maxRecords` are cut out (`truncated`), and a document with more elements than its
 * records explain is refused. Entities are not expanded; the five predefined ones and character references
 * are decoded in the values kept. A record that fails validation is skipped; a report without its id or
 * policy domain is refused. Never throws for bad input.
 */

/** Elements a record may bring (a row, identifiers, auth results) before the document counts as padded. */
const ELEMENTS_PER_RECORD = 100;
const ELEMENTS_BASE = 1_000;
/** Most auth_results of each kind kept per record. */
const MAX_AUTH_RESULTS = 8;
const MAX_COUNT = 1_000_000_000;

const ARRAYS = new Set(['feedback.record', 'feedback.record.auth_results.dkim', 'feedback.record.auth_results.spf']);
const parser = new XMLParser({
  processEntities: false,
  htmlEntities: false,
  removeNSPrefix: true,
  ignoreAttributes: true,
  ignoreDeclaration: true,
  ignorePiTags: true,
  parseTagValue: false,
  isArray: (_name, jpath) => ARRAYS.has(String(jpath)),
});

type Node = Record<string, unknown>;

export async function parseDmarcMail(raw: Buffer, bounds: AggregateBounds): Promise<AggregateParse<DmarcReport>> {
  try {
    const xml = await reportDocument(raw, 'dmarc', bounds.maxBytes);
    return { report: readDmarcXml(xml, bounds.maxRecords) };
  } catch (err) {
    if (err instanceof ReportRefusal) return { report: null, reason: err.reason };
    return { report: null, reason: 'bad_xml' };
  }
}

/** The report in an XML document (exported for the tests of the XML alone). */
export function readDmarcXml(xml: string, maxRecords: number): DmarcReport {
  const scanned = scanXml(xml, 'record', maxRecords);
  const kept = Math.min(scanned.found, maxRecords);
  if (scanned.elements > ELEMENTS_BASE + ELEMENTS_PER_RECORD * kept) throw new ReportRefusal('too_many_elements');
  if (XMLValidator.validate(scanned.text) !== true) throw new ReportRefusal('bad_xml');
  const feedback = node((parser.parse(scanned.text) as Node).feedback);
  if (!feedback) throw new ReportRefusal('not_a_report');
  const meta = node(feedback.report_metadata) ?? {};
  const range = node(meta.date_range) ?? {};
  const published = node(feedback.policy_published) ?? {};
  const reportId = text(meta.report_id);
  const policyDomain = domain(published.domain);
  const beginAt = seconds(range.begin);
  const endAt = seconds(range.end);
  if (!reportId || !policyDomain || beginAt === null || endAt === null) throw new ReportRefusal('missing_fields');
  const policy: Record<string, string> = {};
  for (const [key, value] of Object.entries(published)) {
    const v = text(value);
    if (key !== 'domain' && v !== null) policy[cut(key, 64)] = v;
  }
  const records: DmarcRecord[] = [];
  for (const r of Array.isArray(feedback.record) ? feedback.record : []) {
    const record = readRecord(node(r));
    if (record) records.push(record);
  }
  return {
    kind: 'dmarc',
    reporter: text(meta.org_name) ?? '',
    reporterEmail: text(meta.email)?.toLowerCase() ?? null,
    reportId,
    beginAt,
    endAt,
    policyDomain,
    policy,
    records,
    truncated: scanned.found > maxRecords,
  };
}

/** One `<record>`, or null when its source IP or count is not valid. */
function readRecord(r: Node | null): DmarcRecord | null {
  const row = node(r?.row);
  if (!r || !row) return null;
  const sourceIp = text(row.source_ip);
  if (!sourceIp || isIP(sourceIp) === 0) return null;
  const countText = text(row.count);
  if (countText === null || !/^\d{1,15}$/.test(countText)) return null;
  const evaluated = node(row.policy_evaluated) ?? {};
  const ids = node(r.identifiers) ?? {};
  const auth = node(r.auth_results) ?? {};
  return {
    sourceIp: sourceIp.toLowerCase(),
    count: Math.min(Number(countText), MAX_COUNT),
    disposition: text(evaluated.disposition)?.toLowerCase() ?? 'none',
    dkimAligned: text(evaluated.dkim)?.toLowerCase() === 'pass',
    spfAligned: text(evaluated.spf)?.toLowerCase() === 'pass',
    headerFrom: domain(ids.header_from) ?? '',
    envelopeFrom: domain(ids.envelope_from),
    dkim: authResults(auth.dkim, 'selector'),
    spf: authResults(auth.spf, 'scope'),
  };
}

function authResults(list: unknown, extra: 'selector' | 'scope'): DmarcAuthResult[] {
  const out: DmarcAuthResult[] = [];
  for (const item of Array.isArray(list) ? list : []) {
    if (out.length === MAX_AUTH_RESULTS) break;
    const a = node(item);
    const d = domain(a?.domain);
    if (!a || d === null) continue;
    const result: DmarcAuthResult = { domain: d, result: text(a.result)?.toLowerCase() ?? 'none' };
    const value = text(a[extra]);
    if (value !== null) result[extra] = value;
    out.push(result);
  }
  return out;
}

const node = (v: unknown): Node | null =>
  v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Node) : null;

/** A leaf's text, entities decoded and cut to 255 characters; null when absent, empty or not a leaf. */
function text(v: unknown): string | null {
  if (typeof v !== 'string') return null;
  const s = cut(decodeEntities(v.trim()));
  return s === '' ? null : s;
}

const domain = (v: unknown) => text(v)?.toLowerCase() ?? null;

/** Epoch seconds (the XML's unit) as ms. */
function seconds(v: unknown): number | null {
  const s = text(v);
  if (s === null || !/^\d{1,12}$/.test(s)) return null;
  return Number(s) * 1000;
}

const NAMED: Record<string, string> = { lt: '<', gt: '>', amp: '&', quot: '"', apos: "'" };

/** XML's predefined entities and character references (entities are not expanded by the parser). */
function decodeEntities(s: string): string {
  if (!s.includes('&')) return s;
  return s.replace(/&(lt|gt|amp|quot|apos|#\d{1,7}|#x[\da-f]{1,6});/gi, (whole, ref: string) => {
    if (ref[0] !== '#') return NAMED[ref.toLowerCase()] ?? whole;
    const code = ref[1] === 'x' || ref[1] === 'X' ? parseInt(ref.slice(2), 16) : parseInt(ref.slice(1), 10);
    return code > 0 && code <= 0x10ffff ? String.fromCodePoint(code) : whole;
  });
}
