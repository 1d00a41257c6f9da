import { z } from 'zod';
import { BOUNCE_CLASSES } from '../../core/mail/bounce-classes.js';
import { defineOperation } from '../contract.js';
import { deliverySchema } from './deliveries.js';
import { messageSpam } from '../../core/webhooks/payload-schemas.js';

const AUTH = ['session', 'oauth', 'account_key', 'scoped_key'] as const;
const scalar = z.union([z.string(), z.number(), z.boolean(), z.null()]);
const message = z.object({
  id: z.string(),
  direction: z.enum(['outbound', 'inbound']),
  status: z.string(),
  domain_id: z.string().nullable(),
  from: z.string(),
  to: z.array(z.string()),
  cc: z.array(z.string()),
  subject: z.string().nullable(),
  metadata: z.record(z.string(), scalar).nullable(),
  attempts: z.number().int(),
  last_error: z.string().nullable(),
  workflow_id: z.string().nullable().describe('The Temporal workflow run that delivered it'),
  smtp_message_id: z.string().nullable(),
  bounce_type: z.string().nullable(),
  next_attempt_at: z.number().int().nullable(),
  created_at: z.number().int(),
  updated_at: z.number().int(),
  sent_at: z.number().int().nullable(),
  spam: messageSpam
    .nullable()
    .optional()
    .describe("Inbound: rspamd's verdict (docs/spam-scoring.md); null on outbound mail"),
});
export const eventSchema = z.object({
  id: z.string().describe('evt_…'),
  type: z.string(),
  messageId: z.string().nullable(),
  recipient: z.string().nullable(),
  data: z.record(z.string(), z.unknown()),
  createdAt: z.number().int(),
});

export const listMessages = defineOperation({
  name: 'messages.list',
  method: 'GET',
  path: '/api/messages',
  auth: AUTH,
  mcp: { title: 'List messages (sent and received)' },
  summary: 'Messages, newest first; page with `before` (the created_at of the last one seen).',
  query: z.object({
    limit: z.coerce.number().int().min(1).max(200).default(50),
    before: z.coerce.number().int().positive().optional(),
    search: z.string().max(200).optional().describe('Matches subject, from or to'),
    direction: z.enum(['outbound', 'inbound']).optional().describe('Only outbound or only inbound messages'),
  }),
  output: z.array(message),
  handler: (input, { core, actor }) => core.messages.list(actor, input),
});

export const getMessage = defineOperation({
  name: 'messages.get',
  method: 'GET',
  path: '/api/messages/:id',
  auth: AUTH,
  mcp: { title: 'Read a message with its delivery trail' },
  summary: 'One message with its metadata, attachments, deliveries and events.',
  params: z.object({ id: z.string().regex(/^msg_[A-Za-z0-9_-]+$/, 'not a message id (msg_…)') }),
  output: z.object({
    message: message.extend({
      html: z.string().nullable(),
      text: z.string().nullable(),
      thread_id: z.string().nullable().describe('Inbound: the conversation root'),
      auth: z.record(z.string(), z.string().nullable()).nullable().describe('Inbound: spf, dkim, dmarc, spam verdicts'),
      recipients: z
        .array(
          z.object({
            address: z.string(),
            status: z.enum(['pending', 'sent', 'deferred', 'bounced']),
            attempts: z.number().int(),
            response: z.string().nullable().describe('The last answer of its server'),
            at: z.number().int().nullable(),
            bounceClass: z
              .enum(BOUNCE_CLASSES)
              .optional()
              .describe('Why it failed or was deferred (docs/deliverability.md, Bounce classes); absent once sent'),
          }),
        )
        .describe(
          "Outbound: each recipient's outcome (one SMTP transaction per recipient domain); empty before the first attempt",
        ),
      sealed: z
        .object({
          alg: z.string().describe('RSA-OAEP-256, PGP or S/MIME: the domain key it was sealed with'),
          envelope: z
            .string()
            .describe(
              "RSA-OAEP-256: the envelope JSON the SDKs' MailKite.decrypt opens with the private key; PGP: the armored message; S/MIME: the application/pkcs7-mime entity",
            ),
        })
        .nullable()
        .optional()
        .describe(
          'Inbound on a domain with an encryption key: the stored copy, sealed (subject and text are then null)',
        ),
    }),
    attachments: z.array(z.object({ filename: z.string(), contentType: z.string() })),
    deliveries: z.array(deliverySchema).describe('Webhook deliveries of an inbound message, newest first'),
    events: z.array(eventSchema),
    trail: z
      .array(
        z.object({
          kind: z.enum(['smtp', 'webhook']),
          at: z.number().int(),
          workflowId: z.string().nullable().describe('The Temporal run that made the attempt'),
          to: z.array(z.string()).optional().describe('SMTP: the recipients of the transaction'),
          deliveryId: z.string().optional(),
          attempt: z.number().int().optional(),
          status: z
            .string()
            .describe(
              "SMTP: sent, deferred, bounced or mixed, or throttled (no transaction: the recipients' site could not take it yet, see docs/deliverability.md); webhook: delivered or failed",
            ),
          response: z.string().describe('What the server answered'),
          source: z.string().optional().describe('SMTP: the egress source the transaction left from (docs/egress.md)'),
          tls: z
            .string()
            .optional()
            .describe(
              'SMTP: what the transport policy noted, e.g. an MTA-STS testing failure (docs/transport-policy.md)',
            ),
        }),
      )
      .describe('Every SMTP transaction or webhook attempt of the message, oldest first'),
    runs: z
      .array(
        z.object({
          workflowId: z.string(),
          url: z.string().nullable().describe('The run in the Temporal UI (TEMPORAL_UI_URL)'),
        }),
      )
      .describe('The workflow runs that touched the message'),
  }),
  handler: (input, { core, actor }) => core.messages.get(actor, input.id),
});

export const rawMessage = defineOperation({
  name: 'messages.raw',
  method: 'GET',
  path: '/api/messages/:id/raw',
  auth: AUTH,
  mcp: { title: 'Download the stored copy of a received message' },
  summary:
    'The stored copy of an inbound message: sealed as stored on a domain with a key, else its RFC 822 source (send Accept: application/octet-stream for the bytes themselves); 404 no_stored_copy when none is kept.',
  params: z.object({ id: z.string().regex(/^msg_[A-Za-z0-9_-]+$/, 'not a message id (msg_…)') }),
  output: z.object({
    id: z.string(),
    encrypted: z.boolean(),
    alg: z.string().nullable().describe('The sealing algorithm; null for a clear copy'),
    raw: z
      .string()
      .describe('The stored bytes as UTF-8 text: the envelope (MailKite.decrypt opens it) or the RFC 822 source'),
  }),
  handler: async ({ id }, { core, actor }) => {
    const copy = await core.messages.raw(actor, id);
    return { id, encrypted: copy.encrypted, alg: copy.alg, raw: copy.raw.toString('utf8') };
  },
});

export const listEvents = defineOperation({
  name: 'events.timeline',
  method: 'GET',
  path: '/api/events',
  auth: AUTH,
  mcp: { title: 'Delivery timeline' },
  summary: 'The delivery timeline: what the service did with messages, newest first.',
  query: z.object({
    limit: z.coerce.number().int().min(1).max(500).default(100),
    before: z.coerce.number().int().positive().optional(),
    messageId: z.string().max(100).optional(),
    type: z.string().max(50).optional(),
  }),
  output: z.array(eventSchema),
  handler: (input, { core, actor }) => core.events.list(actor, input),
});
