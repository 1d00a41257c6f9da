import { z } from 'zod';
import { defineOperation } from '../contract.js';

const AUTH = ['session', 'oauth', 'account_key', 'scoped_key'] as const;

/** `POST /v1/route`, what the official SDKs' `route()` calls (their RouteMessage and RouteResult). */
export const routeMessage = defineOperation({
  name: 'inbound.route',
  method: 'POST',
  path: '/v1/route',
  auth: AUTH,
  schemaName: 'route',
  mcp: {
    name: 'route_message',
    title: 'Run a message through one of your routes (its action: webhook, forward, store)',
  },
  summary:
    "Runs a message through one of the caller's registered routes as if it had arrived (by routeId, or the address a route matches); 404 for a route not yours.",
  body: z
    .strictObject({
      routeId: z
        .string()
        .regex(/^rte_[A-Za-z0-9_-]+$/, 'not a route id (rte_…)')
        .optional(),
      address: z.string().min(3).max(320).optional().describe('An address one of your routes matches'),
      from: z.string().min(3).max(998).describe('Sender recorded on the message, bare or "Name <address>"'),
      subject: z.string().max(998).optional(),
      text: z.string().max(5_000_000).optional(),
      html: z.string().max(5_000_000).optional(),
    })
    .refine((b) => b.routeId !== undefined || b.address !== undefined, 'one of routeId or address is required'),
  output: z.object({
    id: z.string().describe('msg_… (for a drop route, the id of the message that was not kept)'),
    routed: z.boolean().describe("Whether the message was handed to the route's action"),
    action: z.enum(['webhook', 'forward', 'store', 'drop']),
  }),
  handler: (input, { core, actor }) => core.routeApi.route(actor, input),
});
