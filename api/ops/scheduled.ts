import { z } from 'zod';
import { defineOperation } from '../contract.js';
import { SEND_AUTH } from './send.js';

const AUTH = [...SEND_AUTH, 'session'] as const;
const scheduled = z.object({
  id: z.string().describe('ssnd_…'),
  messageId: z.string(),
  status: z.enum(['scheduled', 'sending', 'sent', 'canceled', 'failed']),
  scheduledAt: z.number().int(),
  createdAt: z.number().int(),
  updatedAt: z.number().int(),
  from: z.string(),
  to: z.array(z.string()),
  subject: z.string().nullable(),
});
const idParams = z.object({ id: z.string().regex(/^ssnd_[A-Za-z0-9_-]+$/, 'not a scheduled send id (ssnd_…)') });

export const listScheduled = defineOperation({
  name: 'scheduled.list',
  method: 'GET',
  path: '/v1/scheduled',
  auth: AUTH,
  mcp: { title: 'List scheduled sends' },
  summary: 'Scheduled sends, latest time first.',
  query: z.object({
    limit: z.coerce.number().int().min(1).max(200).default(50),
    status: z.enum(['scheduled', 'sending', 'sent', 'canceled', 'failed']).optional(),
  }),
  output: z.array(scheduled),
  handler: (input, { core, actor }) => core.scheduled.list(actor, input),
});

export const getScheduled = defineOperation({
  name: 'scheduled.get',
  method: 'GET',
  path: '/v1/scheduled/:id',
  auth: AUTH,
  mcp: { title: 'Read a scheduled send' },
  summary: 'One scheduled send.',
  params: idParams,
  output: scheduled,
  handler: (input, { core, actor }) => core.scheduled.get(actor, input.id),
});

export const cancelScheduled = defineOperation({
  name: 'scheduled.cancel',
  method: 'DELETE',
  path: '/v1/scheduled/:id',
  auth: AUTH,
  mcp: { title: 'Cancel a scheduled send' },
  summary: 'Cancel a scheduled send: canceled, or 409 too_late once sending has started.',
  params: idParams,
  output: z.object({ ok: z.literal(true), id: z.string(), status: z.literal('canceled') }),
  handler: (input, { core, actor }) => core.scheduled.cancel(actor, input.id),
});
