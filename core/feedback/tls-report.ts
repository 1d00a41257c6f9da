import { randomBytes } from 'node:crypto';
import DKIM from 'nodemailer/lib/dkim';
import type { schema } from '../../db/index.js';
import type { ServiceSigner } from '../domains/service-domain.js';
import { SIGNED_HEADERS } from '../transport/dkim.js';

type OutcomeRow = typeof schema.tlsOutcomes.$inferSelect;

/** An RFC 8460 §4.4 report (the fields this platform fills). */
export type TlsReportJson = {
  'organization-name': string;
  'date-range': { 'start-datetime': string; 'end-datetime': string };
  'contact-info': string;
  'report-id': string;
  policies: {
    policy: { 'policy-type': string; 'policy-domain': string; 'mx-host': string[] };
    summary: { 'total-successful-session-count': number; 'total-failure-session-count': number };
    'failure-details': {
      'result-type': string;
      'sending-mta-ip'?: string;
      'receiving-mx-hostname': string;
      'receiving-ip'?: string;
      'failed-session-count': number;
    }[];
  }[];
};

/**
 * The `rua` URIs of a `_smtp._tls` TXT answer (RFC 8460 §3): the one record starting `v=TLSRPTv1`
 * (none, or more than one, is no policy), its `rua` a comma-separated list of mailto: and https: URIs.
 */
export function parseTlsRpt(answers: string[][]): string[] {
  const records = answers.map((chunks) => chunks.join('')).filter((r) => /^v=TLSRPTv1\s*(?:;|$)/i.test(r.trim()));
  if (records.length !== 1) return [];
  for (const part of records[0]!.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0 || part.slice(0, eq).trim().toLowerCase() !== 'rua') continue;
    return part
      .slice(eq + 1)
      .split(',')
      .map((u) => u.trim())
      .filter((u) => /^(?:mailto|https?):/i.test(u));
  }
  return [];
}

const isoOf = (ms: number) => new Date(ms).toISOString().replace('.000Z', 'Z');

/** One report for one policy domain and period, from its counted sessions (policy type no-policy-found). */
export function buildTlsReport(r: {
  policyDomain: string;
  periodStart: number;
  periodMs: number;
  reportId: string;
  serviceDomain: string;
  rows: OutcomeRow[];
}): TlsReportJson {
  const byType = new Map<string, OutcomeRow[]>();
  for (const row of r.rows) byType.set(row.policyType, [...(byType.get(row.policyType) ?? []), row]);
  return {
    'organization-name': r.serviceDomain,
    'date-range': { 'start-datetime': isoOf(r.periodStart), 'end-datetime': isoOf(r.periodStart + r.periodMs - 1000) },
    'contact-info': `tlsrpt@${r.serviceDomain}`,
    'report-id': r.reportId,
    policies: [...byType].map(([policyType, rows]) => {
      const failed = rows.filter((x) => x.result !== 'success');
      const sum = (xs: OutcomeRow[]) => xs.reduce((n, x) => n + Number(x.count), 0);
      return {
        policy: {
          'policy-type': policyType,
          'policy-domain': r.policyDomain,
          'mx-host': [...new Set(rows.map((x) => x.mxHost))].sort(),
        },
        summary: {
          'total-successful-session-count': sum(rows) - sum(failed),
          'total-failure-session-count': sum(failed),
        },
        'failure-details': failed.map((x) => ({
          'result-type': x.result,
          ...(x.sendingIp ? { 'sending-mta-ip': x.sendingIp } : {}),
          'receiving-mx-hostname': x.mxHost,
          ...(x.receivingIp ? { 'receiving-ip': x.receivingIp } : {}),
          'failed-session-count': Number(x.count),
        })),
      };
    }),
  };
}

const base64Lines = (b: Buffer) => (b.toString('base64').match(/.{1,76}/g) ?? []).join('\r\n');

/**
 * The report as mail (RFC 8460 §5.3): multipart/report; report-type="tlsrpt", a text part and the gzip'd
 * JSON as application/tlsrpt+gzip named `submitter!domain!begin!end.json.gz`, the TLS-Report-Domain and
 * TLS-Report-Submitter headers, DKIM-signed by SERVICE_DOMAIN with those two headers signed too.
 */
export async function reportMail(m: {
  serviceDomain: string;
  to: string;
  report: TlsReportJson;
  gz: Buffer;
  key: ServiceSigner;
}): Promise<{ raw: Buffer; subject: string }> {
  const domain = m.report.policies[0]?.policy['policy-domain'] ?? '';
  const range = m.report['date-range'];
  const seconds = (iso: string) => Math.floor(Date.parse(iso) / 1000);
  const file = `${m.serviceDomain}!${domain}!${seconds(range['start-datetime'])}!${seconds(range['end-datetime'])}.json.gz`;
  const subject = `Report Domain: ${domain} Submitter: ${m.serviceDomain} Report-ID: <${m.report['report-id']}>`;
  const boundary = `tlsrpt-${randomBytes(12).toString('hex')}`;
  const text = `This is an aggregate TLS report from ${m.serviceDomain} for ${domain} (RFC 8460).`;
  const lines = [
    `From: TLS reports <tlsrpt@${m.serviceDomain}>`,
    `To: <${m.to}>`,
    `Subject: ${subject}`,
    `Date: ${new Date().toUTCString().replace('GMT', '+0000')}`,
    `Message-ID: <${randomBytes(12).toString('hex')}@${m.serviceDomain}>`,
    `TLS-Report-Domain: ${domain}`,
    `TLS-Report-Submitter: ${m.serviceDomain}`,
    'MIME-Version: 1.0',
    `Content-Type: multipart/report; report-type="tlsrpt"; boundary="${boundary}"`,
    '',
    `--${boundary}`,
    'Content-Type: text/plain; charset=utf-8',
    '',
    text,
    '',
    `--${boundary}`,
    'Content-Type: application/tlsrpt+gzip',
    'Content-Transfer-Encoding: base64',
    `Content-Disposition: attachment; filename="${file}"`,
    '',
    base64Lines(m.gz),
    `--${boundary}--`,
    '',
  ];
  const signer = new DKIM({
    domainName: m.key.domain,
    keySelector: m.key.selector,
    privateKey: m.key.privateKey,
    headerFieldNames: `${SIGNED_HEADERS}:TLS-Report-Domain:TLS-Report-Submitter`,
  });
  const chunks: Buffer[] = [];
  const out = signer.sign(Buffer.from(lines.join('\r\n')));
  await new Promise<void>((resolve, reject) => {
    out.on('data', (c: Buffer) => chunks.push(c));
    out.on('end', resolve);
    out.on('error', reject);
  });
  return { raw: Buffer.concat(chunks), subject };
}
