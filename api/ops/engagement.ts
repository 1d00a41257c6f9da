import { z } from 'zod';
import { ENGAGEMENT_TYPES } from '../../core/mail/event-types.js';
import { defineOperation, okSchema } from '../contract.js';
import { domainIdParams, domainRow } from './domain-schemas.js';
import { DOMAIN_AUTH } from './domains.js';

export const setTrackingWebhook = defineOperation({
  name: 'engagement.setTrackingWebhook',
  method: 'PUT',
  path: '/api/domains/:id/tracking-webhook',
  auth: DOMAIN_AUTH,
  summary:
    "Send the domain's engagement events (sent, bounced, complained, opened, clicked) to this URL, signed with the account secret.",
  params: domainIdParams,
  body: z.strictObject({ url: z.string().min(1).max(2048).describe('https (http only for localhost)') }),
  output: z.object({
    domain: domainRow,
    signingSecret: z.string().describe("The account secret (whsec_…): signs the tracking webhook's events"),
  }),
  handler: ({ id, url }, { core, actor }) => core.engagement.setTrackingWebhook(actor, id, url),
});

export const clearTrackingWebhook = defineOperation({
  name: 'engagement.clearTrackingWebhook',
  method: 'DELETE',
  path: '/api/domains/:id/tracking-webhook',
  auth: DOMAIN_AUTH,
  summary: 'Stop engagement events to the tracking webhook.',
  params: domainIdParams,
  output: okSchema,
  handler: (input, { core, actor }) => core.engagement.clearTrackingWebhook(actor, input.id),
});

export const setWebhookEvents = defineOperation({
  name: 'engagement.setWebhookEvents',
  method: 'PUT',
  path: '/api/domains/:id/webhook-events',
  auth: DOMAIN_AUTH,
  summary: 'Opt the inbound webhook in to engagement events (the tracking webhook, when set, wins).',
  params: domainIdParams,
  body: z.strictObject({ events: z.union([z.literal('all'), z.array(z.enum(ENGAGEMENT_TYPES)).min(1)]) }),
  output: z.object({
    domain: domainRow,
    signingSecret: z
      .string()
      .describe('The account secret (whsec_…): the fallback key of engagement events at the inbound webhook'),
  }),
  handler: ({ id, events }, { core, actor }) => core.engagement.setWebhookEvents(actor, id, events),
});

export const clearWebhookEvents = defineOperation({
  name: 'engagement.clearWebhookEvents',
  method: 'DELETE',
  path: '/api/domains/:id/webhook-events',
  auth: DOMAIN_AUTH,
  summary: 'Back to inbound email.received only.',
  params: domainIdParams,
  output: okSchema,
  handler: (input, { core, actor }) => core.engagement.clearWebhookEvents(actor, input.id),
});
