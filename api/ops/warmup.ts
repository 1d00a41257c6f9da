import { z } from 'zod';
import { defineOperation, okSchema } from '../contract.js';
import { domainIdParams } from './domain-schemas.js';
import { DOMAIN_AUTH } from './domains.js';
import { warmupView } from './warmup-schemas.js';

export const startWarmup = defineOperation({
  name: 'domains.startWarmup',
  method: 'PUT',
  path: '/api/domains/:id/warmup',
  auth: DOMAIN_AUTH,
  summary:
    "Start (or restart from day 1) a warm-up plan: a daily volume per destination site that grows each day; mail past the day's volume waits for the next day.",
  params: domainIdParams,
  body: z.strictObject({
    schedule: z
      .array(z.number().int().min(1).max(10_000_000))
      .min(1)
      .max(90)
      .optional()
      .describe(
        'Messages per destination site on each day (default: 50, 100, 200, 400, 800, 1500, 3000, 6000, 12000, 25000, 50000, 100000)',
      ),
  }),
  output: z.object({ warmup: warmupView }),
  handler: ({ id, ...input }, { core, actor }) => core.warmup.start(actor, id, input),
});

export const stopWarmup = defineOperation({
  name: 'domains.stopWarmup',
  method: 'DELETE',
  path: '/api/domains/:id/warmup',
  auth: DOMAIN_AUTH,
  summary: "End a domain's warm-up plan: its mail is no longer held to a daily volume.",
  params: domainIdParams,
  output: okSchema,
  handler: (input, { core, actor }) => core.warmup.stop(actor, input.id),
});
