import { z } from 'zod';
import { MAX_BUCKETS } from '../../core/feedback/activity.js';
import { defineOperation } from '../contract.js';

/**
 * GET /api/metrics: the account's mail activity as time series for the dashboard's charts (docs/api.md,
 * "Activity metrics"). Not to be confused with GET /metrics, the operator's Prometheus exposition (api/metrics.ts).
 */
const counts = {
  sent: z
    .number()
    .int()
    .describe('Recipients of outbound messages accepted (API, SMTP submission, broadcasts, sequences)'),
  delivered: z.number().int().describe('Recipients the receiving server accepted (email.sent)'),
  deferred: z.number().int().describe('Temporary failures, retried later (email.deferred)'),
  bounced: z.number().int().describe('Bounces, synchronous and reported later (email.bounced)'),
  complained: z.number().int().describe('Spam complaints from feedback loops (email.complained)'),
  opened: z.number().int().describe('Opens of the tracking pixel (email.opened)'),
  clicked: z.number().int().describe('Clicks on tracked links (email.clicked)'),
  bounced_by_class: z
    .record(z.string(), z.number().int())
    .describe('bounced split by bounce class (invalid_recipient, mailbox_full, spam_block, …; docs/deliverability.md)'),
};
const activityCounts = z.object(counts);
const ms = z.coerce.number().int().min(0).max(8_640_000_000_000_000);

export const getMetrics = defineOperation({
  name: 'metrics.get',
  method: 'GET',
  path: '/api/metrics',
  auth: ['session', 'oauth', 'account_key', 'scoped_key'],
  mcp: { title: 'Mail activity over time (sent, delivered, bounced, complained, opened, clicked)' },
  summary:
    "The account's mail activity per hour or day (sent, delivered, deferred, bounced by class, complained, opened, clicked), every bucket present, with totals; one domain with domain_id (a scoped key: its own).",
  query: z.object({
    period: z.enum(['hour', 'day']).default('day').describe('Bucket size, UTC-aligned (default day)'),
    from: ms
      .optional()
      .describe('Start (ms epoch), rounded down to its bucket; default 30 days (day) or 48 hours (hour) before to'),
    to: ms.optional().describe(`End (ms epoch), its bucket included; default now. At most ${MAX_BUCKETS} buckets`),
    domain_id: z.string().min(1).max(64).optional().describe("One domain's activity (dom_…); default the account's"),
  }),
  output: z.object({
    period: z.enum(['hour', 'day']),
    from: z.number().int().describe('Start of the first bucket (ms epoch)'),
    to: z.number().int().describe('End of the last bucket, exclusive (ms epoch)'),
    domain_id: z.string().nullable().describe('The domain counted, or null for the whole account'),
    series: z.array(activityCounts.extend({ t: z.number().int().describe('Bucket start (ms epoch, UTC)') })),
    totals: activityCounts,
  }),
  handler: ({ period, from, to, domain_id }, { core, actor }) =>
    core.activity.series(actor, { period, from, to, domainId: domain_id }),
});
