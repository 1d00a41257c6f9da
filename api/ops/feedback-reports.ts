import { z } from 'zod';
import { defineOperation } from '../contract.js';
import { domainIdParams } from './domain-schemas.js';
import { DOMAIN_AUTH } from './domains.js';

const days = z.object({
  days: z.coerce.number().int().min(1).max(400).default(30).describe('How many days back (UTC days, today included)'),
});
const count = z.number().int();

const dmarcSummary = z.object({
  domain: z.string(),
  from: z.number().int().describe('Start of the window (ms, UTC midnight)'),
  to: z.number().int().describe('End of the window (ms, exclusive)'),
  totals: z.object({
    messages: count.describe('Messages the reports count'),
    aligned: count.describe('Of those, how many passed DMARC (DKIM or SPF aligned)'),
    pass_rate: z.number().nullable().describe('aligned / messages; null with no message'),
    reports: count,
  }),
  days: z.array(z.object({ day: count, messages: count, aligned: count, failed: count })),
  sources: z
    .array(
      z.object({
        source_ip: z.string(),
        messages: count,
        aligned: count,
        dkim_aligned: count,
        spf_aligned: count,
        dispositions: z.object({ none: count, quarantine: count, reject: count }),
        platform: z.boolean().describe("True for the platform's own egress address (PUBLIC_IP)"),
        reporters: z.array(z.string()),
      }),
    )
    .describe('Volume by source IP, largest first (at most 200)'),
  failing: z
    .array(z.object({ source_ip: z.string(), messages: count, platform: z.boolean() }))
    .describe('Sources that sent as the domain without passing, with the messages that failed'),
  reporters: z.array(z.object({ reporter: z.string(), reports: count, messages: count, last_report_at: count })),
});

export const getDmarc = defineOperation({
  name: 'domains.dmarc',
  method: 'GET',
  path: '/api/domains/:id/dmarc',
  auth: DOMAIN_AUTH,
  mcp: { title: 'DMARC aggregate reports of a domain: sources, alignment, reporters' },
  summary:
    'Summary of the DMARC aggregate reports received for the domain (mailed to dmarc@SERVICE_DOMAIN): volume by source, the share that passes aligned, failing sources, reporters.',
  params: domainIdParams,
  query: days,
  output: dmarcSummary,
  handler: ({ id, days: n }, { core, actor }) => core.reportSummaries.dmarc(actor, id, n),
});

const tlsSummary = z.object({
  domain: z.string(),
  from: count,
  to: count,
  totals: z.object({ success: count, failure: count, reports: count }),
  days: z.array(z.object({ day: count, success: count, failure: count })),
  failure_types: z
    .array(z.object({ result_type: z.string(), sessions: count }))
    .describe('RFC 8460 result types with the failed sessions they count'),
  reports: z
    .array(
      z.object({
        id: z.string(),
        reporter: z.string(),
        report_id: z.string(),
        begin_at: count,
        end_at: count,
        success: count,
        failure: count,
        truncated: z.boolean(),
        policies: z.array(z.record(z.string(), z.unknown())),
      }),
    )
    .describe('The latest reports (at most 50), newest first'),
});

export const getTlsReports = defineOperation({
  name: 'domains.tlsReports',
  method: 'GET',
  path: '/api/domains/:id/tls-reports',
  auth: DOMAIN_AUTH,
  mcp: { title: 'TLS reports (RFC 8460) received about a domain: sessions and failure types' },
  summary:
    'Summary of the TLS reports (RFC 8460) received for the domain (mailed to tlsrpt@SERVICE_DOMAIN): sessions that succeeded and failed, by failure type.',
  params: domainIdParams,
  query: days,
  output: tlsSummary,
  handler: ({ id, days: n }, { core, actor }) => core.reportSummaries.tls(actor, id, n),
});
