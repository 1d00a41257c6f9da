import { z } from 'zod';

/** Where a domain's warm-up plan stands (`GET /api/domains/:id` → `domain.warmup`, and the answer of starting one). */
export const warmupView = z.object({
  status: z.enum(['warming', 'done']),
  day: z.number().int().describe('The day of the plan it is on, from 1 (the last day once done)'),
  days: z.number().int().describe('Days in the plan'),
  dailyLimit: z.number().int().nullable().describe('Messages per destination site today; null once done'),
  schedule: z.array(z.number().int()).describe('Messages per destination site on each day'),
  startedAt: z.number().int(),
  nextDayAt: z.number().int().nullable().describe('When the next day begins (ms epoch); null once done'),
  completedAt: z.number().int().nullable(),
  sentToday: z
    .record(z.string(), z.number().int())
    .describe('Messages sent today, by destination site (sorted MX host set)'),
  workflowId: z.string().describe("The plan's workflow in the Temporal UI (warmup-<domain id>)"),
});
