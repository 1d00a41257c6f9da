import { z } from 'zod';
import { defineOperation, okSchema } from '../contract.js';

const AUTH = ['session', 'oauth', 'account_key'] as const;
const idParams = z.object({
  id: z
    .string()
    .regex(/^bct_[A-Za-z0-9_-]{20,}$/, 'a broadcast id (bct_…)')
    .describe('bct_…'),
});
const broadcast = z.object({
  id: z.string(),
  user_id: z.string(),
  name: z.string(),
  from_addr: z.string(),
  reply_to: z.string().nullable(),
  subject: z.string(),
  preview: z.string().nullable(),
  audience: z.string().describe('JSON string of {type: all|list|filter, id?, query?}'),
  template_id: z.string().nullable(),
  html: z.string().nullable(),
  text: z.string().nullable(),
  footer_address: z.string().nullable().describe('Postal address of the CAN-SPAM footer'),
  status: z.enum(['draft', 'scheduled', 'sending', 'sent', 'canceled', 'failed']),
  scheduled_at: z.number().int().nullable(),
  audience_count: z.number().int().nullable(),
  sent_count: z.number().int(),
  fail_count: z.number().int(),
  skip_count: z.number().int().describe('Recipients skipped at send time (unsubscribed, suppressed, deleted)'),
  sent_at: z.number().int().nullable(),
  created_at: z.number().int(),
  updated_at: z.number().int(),
});
const progress = z.object({
  live: z.boolean().describe("true when the counts come from the running workflow's progressQuery"),
  sent: z.number().int(),
  failed: z.number().int(),
  skipped: z.number().int(),
  remaining: z.number().int().nullable(),
  current_batch: z.number().int().nullable(),
});
const audience = z.strictObject({
  type: z.enum(['all', 'list', 'filter']),
  id: z.string().max(100).optional().describe('lst_… for type list'),
  query: z
    .string()
    .max(2000)
    .optional()
    .describe('Filter query for type filter, e.g. attributes.plan = "pro" and last_seen_at > 2026-01-01 (README.md)'),
});
const str = (max: number) => z.string().max(max);
const fields = {
  name: str(200).optional(),
  replyTo: str(320).optional(),
  subject: str(998).optional().describe('Subject; may contain {{merge_tags}}'),
  preview: str(500).optional().describe('Inbox preview text'),
  audience: audience.optional(),
  templateId: str(100).optional(),
  html: str(512 * 1024)
    .optional()
    .describe('HTML body; {{email}}, {{name}}, {{first_name}}, {{unsubscribe_url}} and every attribute are merge tags'),
  text: str(512 * 1024).optional(),
  footerAddress: str(500).optional().describe("Postal address for the CAN-SPAM footer; defaults to the account's"),
};

export const listBroadcasts = defineOperation({
  name: 'broadcasts.list',
  method: 'GET',
  path: '/api/broadcasts',
  auth: AUTH,
  mcp: { title: 'List broadcasts' },
  summary: "The account's broadcasts, newest first.",
  output: z.array(broadcast),
  handler: (_i, { core, actor }) => core.broadcasts.list(actor),
});

export const createBroadcast = defineOperation({
  name: 'broadcasts.create',
  method: 'POST',
  path: '/api/broadcasts',
  auth: AUTH,
  status: 201,
  idempotencyKey: true,
  mcp: { title: 'Create a draft broadcast' },
  summary: 'Create a draft broadcast (audience defaults to all subscribed contacts).',
  body: z.strictObject({
    from: str(320).describe('Sender on a verified sending domain; may carry a display name'),
    ...fields,
  }),
  output: broadcast,
  handler: (input, { core, actor }) => core.broadcasts.create(actor, input),
});

export const readBroadcast = defineOperation({
  name: 'broadcasts.get',
  method: 'GET',
  path: '/api/broadcasts/:id',
  auth: AUTH,
  mcp: { title: 'Broadcast status and progress' },
  summary: 'A broadcast with its status and recipient summary (live from the workflow while it runs).',
  params: idParams,
  output: broadcast.extend({ progress }),
  handler: (input, { core, actor }) => core.broadcasts.get(actor, input.id),
});

export const updateBroadcast = defineOperation({
  name: 'broadcasts.update',
  method: 'PATCH',
  path: '/api/broadcasts/:id',
  auth: AUTH,
  summary: 'Change a draft; 409 not_draft once it is scheduled or sent.',
  params: idParams,
  body: z.strictObject({ from: str(320).optional(), ...fields }),
  output: broadcast,
  handler: ({ id, ...patch }, { core, actor }) => core.broadcasts.update(actor, id, patch),
});

export const deleteBroadcast = defineOperation({
  name: 'broadcasts.delete',
  method: 'DELETE',
  path: '/api/broadcasts/:id',
  auth: AUTH,
  summary: 'Delete a draft; 409 not_draft otherwise.',
  params: idParams,
  output: okSchema,
  handler: (input, { core, actor }) => core.broadcasts.remove(actor, input.id),
});

export const sendBroadcast = defineOperation({
  name: 'broadcasts.send',
  method: 'POST',
  path: '/api/broadcasts/:id/send',
  auth: AUTH,
  status: 202,
  idempotencyKey: true,
  mcp: { title: 'Send or schedule a draft broadcast', openWorld: true },
  summary:
    'Send a draft now, or at `scheduledAt` (ISO 8601, ms epoch or "in 2 hours"); the audience size is snapshotted.',
  params: idParams,
  body: z.strictObject({ scheduledAt: z.union([z.string().max(100), z.number()]).optional() }),
  output: z.object({
    id: z.string(),
    status: z.enum(['scheduled', 'sending']),
    scheduledAt: z.number().int().optional().describe('ms epoch, when scheduled'),
    audienceCount: z.number().int(),
  }),
  handler: ({ id, scheduledAt }, { core, actor }) => core.broadcasts.send(actor, id, scheduledAt),
});

export const cancelBroadcast = defineOperation({
  name: 'broadcasts.cancel',
  method: 'POST',
  path: '/api/broadcasts/:id/cancel',
  auth: AUTH,
  summary:
    'Cancel a scheduled or sending broadcast (cancelSignal to its run): no batch starts after it; 409 not_cancelable otherwise.',
  params: idParams,
  output: broadcast,
  handler: (input, { core, actor }) => core.broadcasts.cancel(actor, input.id),
});
