import { z } from 'zod';
import { BOUNCE_CLASSES } from '../mail/bounce-classes.js';

/**
 * Every payload the service POSTs to a webhook, defined once: the builders are typed by these schemas
 * (core/inbound/payload.ts, core/webhooks/engagement.ts, core/webhooks/test-event.ts) and /v1/schemas
 * publishes them as JSON Schema (DESIGN.md wire conventions give the shapes).
 */
const party = z.object({
  address: z.string().describe('Lowercased address'),
  name: z.string().optional().describe('Omitted when unknown'),
});
const nullableString = z.string().nullable();

const scoredVerdict = z.object({
  scored: z.literal(true),
  score: z.number().describe("rspamd's score: the higher, the more likely spam"),
  required: z.number().describe('The score at which rspamd itself would reject'),
  action: z
    .string()
    .describe("rspamd's action: no action, greylist, add header, rewrite subject, soft reject or reject"),
  symbols: z
    .array(z.object({ name: z.string(), score: z.number() }))
    .describe('The rules that fired, strongest first (at most 15)'),
});
const unscoredVerdict = z.object({
  scored: z.literal(false),
  reason: z.string().describe('Why not: not_configured (no rspamd), timeout, unreachable, bad_answer or too_large'),
});
/** rspamd's verdict on an inbound message (docs/spam-scoring.md), as the webhook payload carries it. */
export const spamVerdict = z
  .union([scoredVerdict, unscoredVerdict])
  .describe('Unscored mail is delivered all the same, and says why');
/** The verdict as GET /api/messages/:id shows it: `marked` once a webhook answered `{"status":"spam"}`. */
const marked = { marked: z.boolean().optional().describe('A webhook answered {"status":"spam"} for it') };
export const messageSpam = z
  .union([scoredVerdict.extend(marked), unscoredVerdict.extend(marked)])
  .describe("rspamd's verdict; unscored mail was delivered all the same, and says why");

export const emailReceivedPayload = z
  .object({
    id: z.string().describe('msg_… of the stored inbound message'),
    type: z.literal('email.received'),
    from: party,
    to: z.array(party).describe('The RCPT addresses this delivery carries'),
    subject: z.string(),
    text: z.string(),
    html: nullableString,
    threadId: nullableString.describe('Conversation root: first References id, else In-Reply-To, else the Message-ID'),
    receivedAt: z.number().int().describe('ms epoch, the same on retries'),
    receivedAtIso: z.string(),
    auth: z
      .object({
        spf: nullableString,
        dkim: nullableString,
        dmarc: nullableString,
        spam: nullableString,
        arc: nullableString.optional().describe('The ARC chain: pass, fail or none (absent on mail received before)'),
      })
      .describe("null when not scored; spam is rspamd's action"),
    spam: spamVerdict.optional().describe('Absent only on messages received before spam scoring'),
    attachments: z.array(
      z.object({
        id: z.string(),
        filename: z.string(),
        contentType: z.string(),
        size: z.number().int(),
        url: z.string().optional().describe('Signed download URL'),
        content: z.string().optional().describe('Base64, when the domain keeps nothing in the clear'),
      }),
    ),
  })
  .describe('Inbound mail for a domain, at its catch-all webhook route');

const messageFields = {
  messageId: nullableString.describe('msg_… of the outbound message'),
  from: nullableString,
  to: z.array(z.string()),
  subject: nullableString,
};
const envelope = <T extends string, D extends z.ZodType>(type: T, data: D, what: string) =>
  z
    .object({
      id: z.string().describe('evt_…'),
      type: z.literal(type),
      createdAt: z.number().int().describe('ms epoch'),
      createdAtIso: z.string(),
      data,
    })
    .describe(what);

export const emailSentPayload = envelope(
  'email.sent',
  z.looseObject({ ...messageFields, response: z.string().optional().describe("The receiving server's answer") }),
  'The receiving server accepted the message for the recipients in data.to',
);
export const emailBouncedPayload = envelope(
  'email.bounced',
  z.looseObject({
    ...messageFields,
    bounce: z.object({
      type: z.string().describe('hard or soft'),
      diagnostic: nullableString.optional(),
      bounceClass: z
        .enum(BOUNCE_CLASSES)
        .optional()
        .describe(
          'invalid_recipient, bad_domain, mailbox_full, message_too_large, spam_block, policy_block, auth_failure, reputation, transient, protocol or other',
        ),
    }),
  }),
  'A recipient bounced (data.to names it)',
);
export const emailComplainedPayload = envelope(
  'email.complained',
  z.looseObject({
    ...messageFields,
    complaint: z.object({ feedbackType: z.string(), userAgent: nullableString.optional() }),
  }),
  'A recipient reported the message as spam (feedback loop)',
);
export const emailOpenedPayload = envelope(
  'email.opened',
  z.looseObject({ ...messageFields, open: z.looseObject({ userAgent: nullableString, ip: z.string().optional() }) }),
  'The tracking pixel was loaded',
);
export const emailClickedPayload = envelope(
  'email.clicked',
  z.looseObject({
    ...messageFields,
    click: z.looseObject({ url: z.string(), userAgent: nullableString, ip: z.string().optional() }),
  }),
  'A tracked link was followed',
);
export const webhookTestPayload = envelope(
  'webhook.test',
  z.object({ domain: z.string() }),
  'The signed test event of POST /api/domains/:id/webhook/test',
);

export const domainSendingPausedPayload = envelope(
  'domain.sending_paused',
  z.looseObject({
    domainId: z.string().describe('dom_…'),
    domain: z.string(),
    pausedAt: z.number().int().describe('ms epoch; the domain shows it as feedback.bulk_paused_at'),
    reason: z.string().describe('The rate, the window and the threshold it went over'),
  }),
  "The complaint guard paused the domain's bulk mail (broadcasts, sequences); transactional sends go on. POST /api/domains/:id/resume-sending resumes it",
);

export const engagementPayload = z.discriminatedUnion('type', [
  emailSentPayload,
  emailBouncedPayload,
  emailComplainedPayload,
  emailOpenedPayload,
  emailClickedPayload,
]);
export type EngagementPayload = z.input<typeof engagementPayload>;
export type EmailReceivedPayload = z.input<typeof emailReceivedPayload>;
export type WebhookTestPayload = z.input<typeof webhookTestPayload>;
export type DomainSendingPausedPayload = z.input<typeof domainSendingPausedPayload>;

/** Webhook payload schemas by the `type` they carry, with the name each is published under at /v1/schemas. */
export const WEBHOOK_PAYLOADS = {
  'email.received': { name: 'webhook-email-received', schema: emailReceivedPayload },
  'email.sent': { name: 'webhook-email-sent', schema: emailSentPayload },
  'email.bounced': { name: 'webhook-email-bounced', schema: emailBouncedPayload },
  'email.complained': { name: 'webhook-email-complained', schema: emailComplainedPayload },
  'email.opened': { name: 'webhook-email-opened', schema: emailOpenedPayload },
  'email.clicked': { name: 'webhook-email-clicked', schema: emailClickedPayload },
  'webhook.test': { name: 'webhook-test', schema: webhookTestPayload },
  'domain.sending_paused': { name: 'webhook-domain-sending-paused', schema: domainSendingPausedPayload },
} as const;
