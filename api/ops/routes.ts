import { z } from 'zod';
import { actorOf } from '../../core/domains/service.js';
import { defineOperation, okSchema } from '../contract.js';
import { DOMAIN_AUTH } from './domains.js';

const route = z.object({
  id: z.string().describe('rte_…'), domain_id: z.string(), domain: z.string(), pattern: z.string(), url: z.string(),
  ack_mode: z.enum(['lenient', 'ack']), created_at: z.number().int(), updated_at: z.number().int(),
});

export const listRoutes = defineOperation({
  name: 'routes.list', method: 'GET', path: '/api/routes', auth: DOMAIN_AUTH,
  summary: 'Webhook routes (the catch-all `*` and address routes).',
  output: z.array(route),
  handler: (_i, { core, principal }) => core.routes.list(actorOf(principal!)),
});

export const createRoute = defineOperation({
  name: 'routes.create', method: 'POST', path: '/api/routes', auth: DOMAIN_AUTH, status: 201,
  summary: 'Route an address pattern of a domain to a webhook; the most specific pattern wins.',
  body: z.strictObject({
    domainId: z.string().regex(/^dom_/, 'must be a domain id (dom_…)'),
    address: z.string().min(1).max(64).describe('*, an exact local part, or one wildcard at the start or end: support-*, *-agent'),
    url: z.string().min(1).max(2048),
    ackMode: z.enum(['lenient', 'ack']).optional(),
  }),
  output: route.extend({ signingSecret: z.string() }),
  handler: (input, { core, principal }) => core.routes.create(actorOf(principal!), input),
});

export const deleteRoute = defineOperation({
  name: 'routes.delete', method: 'DELETE', path: '/api/routes/:id', auth: DOMAIN_AUTH,
  summary: 'Delete a route.',
  params: z.object({ id: z.string().min(1).max(100) }),
  output: okSchema,
  handler: (input, { core, principal }) => core.routes.remove(actorOf(principal!), input.id),
});
