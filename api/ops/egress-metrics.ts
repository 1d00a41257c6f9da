import { z } from 'zod';
import { defineOperation } from '../contract.js';

/**
 * GET /api/metrics/egress: the account's SMTP outcomes per egress source and pool (docs/deliverability.md, "Outcomes by
 * source and pool"), summed from the counters the worker keeps (core/egress/counters.ts).
 */
const outcomes = {
  sent: z.number().int().describe('Recipients the receiving server accepted'),
  deferred: z.number().int().describe('Recipients deferred (a temporary failure, retried later)'),
  bounced: z.number().int().describe('Recipients refused in the SMTP transaction'),
};
const ms = z.coerce.number().int().min(0).max(8_640_000_000_000_000);

export const getEgressMetrics = defineOperation({
  name: 'metrics.egress',
  method: 'GET',
  path: '/api/metrics/egress',
  auth: ['session', 'oauth', 'account_key', 'scoped_key'],
  mcp: { title: 'Delivery outcomes by egress source and pool' },
  summary:
    "The account's delivery outcomes (sent, deferred, bounced) per egress source and pool over whole hours, with totals; one domain with domain_id (a scoped key: its own).",
  query: z.object({
    from: ms.optional().describe('Start (ms epoch), rounded down to its hour; default 24 hours before to'),
    to: ms.optional().describe('End (ms epoch), its hour included; default now. At most 400 days'),
    domain_id: z.string().min(1).max(64).optional().describe("One domain's outcomes (dom_…); default the account's"),
  }),
  output: z.object({
    from: z.number().int().describe('Start of the first hour counted (ms epoch)'),
    to: z.number().int().describe('End of the last hour counted, exclusive (ms epoch)'),
    domain_id: z.string().nullable().describe('The domain counted, or null for the whole account'),
    rows: z.array(
      z.object({
        source: z.string().describe('The egress source (egress.toml [source.<name>])'),
        pool: z.string().describe('The egress pool the message was routed to'),
        ...outcomes,
      }),
    ),
    totals: z.object(outcomes),
  }),
  handler: ({ from, to, domain_id }, { core, actor }) =>
    core.egressOutcomes.forActor(actor, { from, to, domainId: domain_id }),
});
