import { z } from 'zod';

const flag = z.union([z.literal(0), z.literal(1)]);

/** A domain row as stored (SPEC.md, Domain). Write responses return this. */
export const domainRow = z.object({
  id: z.string().describe('dom_…'),
  user_id: z.string(),
  domain: z.string().describe('Lowercased name'),
  status: z.enum(['pending', 'verified', 'failed']).describe('verified follows the MX check'),
  mx_verified: flag.describe('1 once MX resolves to the service; gates inbound mail'),
  spf_verified: flag,
  dkim_verified: flag,
  dmarc_verified: flag,
  zero_retention: flag,
  track_opens: flag,
  enc_public_key: z.string().nullable(),
  enc_key_alg: z.string().nullable(),
  enc_fingerprint: z.string().nullable(),
  enc_format: z.string().nullable(),
  provider: z
    .string()
    .describe("Sending provider type of the domain's egress pool: svc (the built-in MTA) or relay (a smarthost)"),
  email_provider_id: z
    .string()
    .nullable()
    .describe(
      'The egress pool backing the domain (a paid plan may choose it on POST; else the platform default, the transactional pool)',
    ),
  tls: z
    .enum(['opportunistic', 'enforced'])
    .optional()
    .describe(
      'enforced: outbound mail only over verified TLS (PATCH /api/domains/:id); default opportunistic. Always present (optional in the schema only so older clients validate)',
    ),
  dns_tokens: z.string().nullable(),
  last_checked_at: z.number().int().nullable(),
  created_at: z.number().int(),
  tracking_webhook_url: z.string().optional(),
  webhook_events: z.string().optional(),
});

export const webhookStatus = z.object({
  status: z.enum(['ok', 'fail', 'running', 'timeout']).nullable(),
  message: z.string().nullable(),
  code: z.number().int().nullable(),
  at: z.number().int().nullable(),
  consecutiveFailures: z.number().int(),
  firstFailedAt: z.number().int().nullable(),
  unhealthy: z.boolean(),
});

const rate = z.number().nullable().describe('0..1; null when nothing was delivered in the window');
/** The complaint guard's figures of a domain (docs/deliverability.md, The complaint guard). */
export const domainFeedback = z.object({
  windows: z
    .array(
      z.object({
        hours: z.number().int().describe('The window: the last this many hours (GUARD_WINDOWS_HOURS)'),
        delivered: z.number().int().describe('Recipients delivered in the window'),
        bounced: z.number().int(),
        complained: z.number().int(),
        complaint_rate: rate.describe('complained / delivered'),
        bounce_rate: rate.describe('bounced / (delivered + bounced)'),
      }),
    )
    .describe('Judged only once delivered reaches GUARD_MIN_VOLUME'),
  warning: z.string().nullable().describe('A rate above its warning threshold (or its pause threshold), else null'),
  bulk_paused_at: z
    .number()
    .int()
    .nullable()
    .describe('Set while broadcasts and sequences are paused; POST /api/domains/:id/resume-sending resumes'),
  bulk_paused_reason: z.string().nullable().describe('The rate, window and threshold that paused it'),
  dmarc: z
    .object({
      days: z.number().int(),
      messages: z.number().int().describe('Messages the DMARC aggregate reports of the last 7 days count'),
      aligned: z.number().int().describe('Of those, how many passed DMARC aligned'),
      pass_rate: rate.describe('aligned / messages; null with no report'),
      failing_sources: z.number().int().describe('Source IPs with messages that failed (GET /api/domains/:id/dmarc)'),
    })
    .nullable()
    .optional()
    .describe('DMARC aggregate reports received (docs/feedback.md); null with none in 7 days'),
});

/** List and detail responses add the enrichment fields. */
export const enrichedDomain = domainRow.extend({
  webhookUrl: z.string().nullable(),
  webhookAckMode: z.enum(['lenient', 'ack']).nullable(),
  webhookStatus: webhookStatus.nullable(),
  dailyLimitReached: z.boolean(),
  feedback: domainFeedback.optional().describe("The complaint guard's rates and the bulk pause"),
});

export const dnsRecord = z.object({
  type: z.enum(['MX', 'TXT', 'CNAME', 'A']),
  name: z.string().describe('Full hostname (FQDN)'),
  value: z.string().describe('Bare RDATA value'),
  priority: z.number().int().optional().describe('MX records only'),
});

export const domainIdParams = z.object({ id: z.string().regex(/^dom_[A-Za-z0-9_-]+$/, 'not a domain id (dom_…)') });

/** What is wrong with the pool backing a domain: a source suspended at some sites, a pool gone from the egress file. */
export const poolWarnings = z
  .array(z.string())
  .optional()
  .describe(
    "Present when the domain's egress pool is unhealthy: a source suspended at some sites, or the pool removed",
  );
