import { z } from 'zod';
import { defineOperation } from '../contract.js';

export const SEND_AUTH = ['account_key', 'scoped_key', 'oauth'] as const;
const scalar = z.union([z.string(), z.number(), z.boolean(), z.null()]);
const addressList = z.union([z.string().min(1).max(998), z.array(z.string().min(1).max(998)).min(1).max(50)]);
const headers = z
  .record(z.string().min(1).max(100), z.string().max(998))
  .describe('Extra raw MIME headers, applied after threading headers (caller wins)');
const templateData = z
  .record(z.string().max(100), scalar)
  .describe('Values filling {{merge_tags}}; HTML values are auto-escaped');
const scheduledAt = z
  .union([z.string().max(100), z.number()])
  .describe('ISO 8601, ms epoch, or text like "in 2 hours"; omitted or past sends now');
export const attachment = z.strictObject({
  filename: z.string().min(1).max(255),
  url: z
    .url({ protocol: /^https?$/ })
    .max(4096)
    .optional()
    .describe('Fetched at send time (25 MB cap)'),
  content: z.string().optional().describe('Base64 bytes'),
  contentType: z.string().max(255).optional().describe('Defaults to application/octet-stream'),
});
const metadata = z
  .record(
    z.string().min(1).max(64, 'metadata keys are at most 64 characters'),
    z.union([
      z.string().max(512, 'metadata string values are at most 512 characters'),
      z.number(),
      z.boolean(),
      z.null(),
    ]),
  )
  .refine((m) => Object.keys(m).length <= 20, 'metadata has at most 20 keys')
  .describe('Kept server-side and echoed on reads; never a MIME header');

export const sendRequest = z.strictObject({
  from: z.string().min(3).max(998).describe('Address on a verified domain, bare or "Name <address>"'),
  to: addressList,
  subject: z.string().max(998).optional().describe('Required unless a template supplies it'),
  html: z.string().max(5_000_000).optional(),
  text: z.string().max(5_000_000).optional(),
  templateId: z
    .string()
    .regex(/^(tpl|base)_/, 'must be a tpl_… or base_… id')
    .optional(),
  templateData: templateData.optional(),
  cc: addressList.optional(),
  bcc: addressList.optional(),
  replyTo: z.string().max(998).optional(),
  inReplyTo: z.string().max(998).optional(),
  headers: headers.optional(),
  metadata: metadata.optional(),
  sequence: z.string().max(200).optional().describe('Name or id of an ACTIVE sequence to enroll the recipient in'),
  sequenceInput: z.record(z.string(), scalar).optional(),
  attachments: z.array(attachment).max(20).optional(),
  scheduledAt: scheduledAt.optional(),
  trackOpens: z.boolean().optional(),
  trackClicks: z.boolean().optional(),
});

export const send = defineOperation({
  name: 'send.single',
  method: 'POST',
  path: '/v1/send',
  auth: SEND_AUTH,
  schemaName: 'send',
  idempotencyKey: true,
  mcp: { name: 'send', title: 'Send an email', openWorld: true },
  summary: 'Send one message now (queued) or later (scheduled).',
  body: sendRequest,
  output: z.object({
    id: z.string().describe('msg_…, or ssnd_… when scheduled'),
    status: z.enum(['queued', 'scheduled']),
    scheduledAt: z.number().int().optional().describe('ms epoch; scheduled sends only'),
  }),
  handler: (input, { core, actor }) => core.sending.send(actor, input),
});

export const sendBatch = defineOperation({
  name: 'send.batch',
  method: 'POST',
  path: '/v1/send/batch',
  auth: SEND_AUTH,
  schemaName: 'send-batch',
  idempotencyKey: true,
  mcp: { name: 'send_batch', title: 'Send one email per recipient (batch)', openWorld: true },
  summary: 'One independent message per recipient (1 to 50); per-recipient failures are reported, not thrown.',
  body: z.strictObject({
    from: z.string().min(3).max(998),
    recipients: z
      .array(
        z.strictObject({
          to: z.string().min(3).max(998).describe('Exactly one address'),
          templateData: templateData.optional(),
          headers: headers.optional(),
        }),
      )
      .min(1)
      .max(50),
    subject: z.string().max(998).optional(),
    html: z.string().max(5_000_000).optional(),
    text: z.string().max(5_000_000).optional(),
    templateId: z
      .string()
      .regex(/^(tpl|base)_/)
      .optional(),
    templateData: templateData.optional(),
    headers: headers.optional(),
    replyTo: z.string().max(998).optional(),
    inReplyTo: z.string().max(998).optional(),
    attachments: z.array(attachment).max(20).optional(),
    scheduledAt: scheduledAt.optional(),
    trackOpens: z.boolean().optional(),
    trackClicks: z.boolean().optional(),
  }),
  output: z.object({
    results: z.array(
      z.object({
        to: z.string(),
        status: z.enum(['sent', 'scheduled', 'failed']),
        id: z.string().optional(),
        error: z.string().optional(),
        code: z.string().optional(),
      }),
    ),
    sent: z.number().int(),
    scheduled: z.number().int(),
    failed: z.number().int(),
  }),
  handler: (input, { core, actor }) => core.sending.sendBatch(actor, input),
});
