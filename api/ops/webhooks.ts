import { z } from 'zod';
import { defineOperation, okSchema } from '../contract.js';
import { domainIdParams, domainRow } from './domain-schemas.js';
import { DOMAIN_AUTH } from './domains.js';

const ackMode = z.enum(['lenient', 'ack']).describe('lenient: any 2xx; ack: 2xx plus {"status":"ok"} or x-svc-ack: ok');

export const setWebhook = defineOperation({
  name: 'webhooks.set',
  method: 'PUT',
  path: '/api/domains/:id/webhook',
  auth: DOMAIN_AUTH,
  summary: 'Set the catch-all webhook of a domain (needs MX verified). https, or http on loopback only.',
  params: domainIdParams,
  body: z.strictObject({ url: z.string().min(1).max(2048), ackMode: ackMode.optional() }),
  output: z.object({
    domain: domainRow,
    webhookUrl: z.string(),
    ackMode,
    routeId: z.string(),
    signingSecret: z.string().describe('whsec_…'),
  }),
  handler: ({ id, ...input }, { core, actor }) => core.routes.setCatchAll(actor, id, input),
});

export const deleteWebhook = defineOperation({
  name: 'webhooks.delete',
  method: 'DELETE',
  path: '/api/domains/:id/webhook',
  auth: DOMAIN_AUTH,
  summary: 'Remove the catch-all webhook.',
  params: domainIdParams,
  output: okSchema,
  handler: (input, { core, actor }) => core.routes.deleteCatchAll(actor, input.id),
});

export const webhookSecret = defineOperation({
  name: 'webhooks.secret',
  method: 'GET',
  path: '/api/domains/:id/webhook/secret',
  auth: DOMAIN_AUTH,
  summary: 'The signing secret of the catch-all webhook. Server-side use only.',
  params: domainIdParams,
  output: z.object({ secret: z.string() }),
  handler: async (input, { core, actor }) => ({
    secret: core.routes.secretOf((await core.routes.catchAllOf(actor, input.id)).route),
  }),
});

export const testWebhook = defineOperation({
  name: 'webhooks.test',
  method: 'POST',
  path: '/api/domains/:id/webhook/test',
  auth: DOMAIN_AUTH,
  idempotencyKey: true,
  summary: 'Send a signed test event to the catch-all webhook.',
  params: domainIdParams,
  output: z.object({ ok: z.boolean(), status: z.number().int().describe('HTTP status; 0 when no response') }),
  handler: (input, { core, actor }) => core.webhookTests.test(actor, input.id),
});

export const accountSecret = defineOperation({
  name: 'webhooks.accountSecret',
  method: 'GET',
  path: '/api/webhooks/secret',
  auth: ['session', 'oauth', 'account_key'],
  summary: 'The account webhook secret: signs tracking-webhook events and is the fallback key.',
  output: z.object({ secret: z.string() }),
  handler: async (_i, { core, actor }) => ({ secret: await core.accountSecret.get(actor.userId) }),
});

export const rotateAccountSecret = defineOperation({
  name: 'webhooks.rotateAccountSecret',
  method: 'POST',
  path: '/api/webhooks/secret/rotate',
  auth: ['session', 'oauth', 'account_key'],
  summary: 'Replace the account webhook secret.',
  output: z.object({ secret: z.string() }),
  handler: async (_i, { core, actor }) => ({ secret: await core.accountSecret.rotate(actor.userId) }),
});
