import { z } from 'zod';
import { defineOperation, okSchema } from '../contract.js';
import { DOMAIN_AUTH } from './domains.js';

const route = z.object({
  id: z.string().describe('rte_…'),
  domain_id: z.string(),
  domain: z.string(),
  pattern: z.string().describe('Local-part pattern'),
  match_pattern: z.string().describe('The pattern with its domain: *@example.com, support-*@example.com'),
  action: z.enum(['webhook', 'forward', 'store', 'drop']),
  destination: z.string().nullable().describe('Webhook URL or forward address; null for store and drop'),
  url: z.string().describe('Webhook URL; empty for other actions'),
  ack_mode: z.enum(['lenient', 'ack']),
  signing_secret: z.string().describe('whsec_… signing webhook posts of this route'),
  created_at: z.number().int(),
  updated_at: z.number().int(),
});

export const listRoutes = defineOperation({
  name: 'routes.list',
  method: 'GET',
  path: '/api/routes',
  auth: DOMAIN_AUTH,
  mcp: { title: 'List inbound routes' },
  summary: 'Routes (the catch-all `*` and address routes) with their action and destination.',
  output: z.array(route),
  handler: (_i, { core, actor }) => core.routes.list(actor),
});

export const createRoute = defineOperation({
  name: 'routes.create',
  method: 'POST',
  path: '/api/routes',
  auth: DOMAIN_AUTH,
  status: 201,
  idempotencyKey: true,
  mcp: { title: 'Create an inbound route' },
  summary:
    'Route an address pattern of a domain: webhook, forward, store (mailbox only) or drop; the most specific pattern wins.',
  body: z.strictObject({
    match: z
      .string()
      .min(1)
      .max(320)
      .optional()
      .describe(
        'An exact address, *@domain, addr+*@domain, support-*@domain, or a local-part pattern (then domainId is required)',
      ),
    action: z.string().max(32).optional().describe('webhook (default), forward, store or drop; agent is not supported'),
    destination: z
      .string()
      .min(1)
      .max(2048)
      .optional()
      .describe('Webhook URL for webhook, an email address for forward'),
    domainId: z.string().regex(/^dom_/, 'must be a domain id (dom_…)').optional(),
    address: z
      .string()
      .min(1)
      .max(64)
      .optional()
      .describe('*, an exact local part, or one wildcard at the start or end: support-*, *-agent'),
    url: z.string().min(1).max(2048).optional().describe('Webhook URL (the older form of destination)'),
    ackMode: z.enum(['lenient', 'ack']).optional(),
  }),
  output: route.extend({ signingSecret: z.string() }),
  handler: (input, { core, actor }) => core.routes.create(actor, input),
});

export const deleteRoute = defineOperation({
  name: 'routes.delete',
  method: 'DELETE',
  path: '/api/routes/:id',
  auth: DOMAIN_AUTH,
  mcp: { title: 'Delete an inbound route' },
  summary: 'Delete a route.',
  params: z.object({ id: z.string().min(1).max(100) }),
  output: okSchema,
  handler: (input, { core, actor }) => core.routes.remove(actor, input.id),
});
