import { z } from 'zod';
import { defineOperation, okSchema } from '../contract.js';

const MANAGE = ['session', 'oauth', 'account_key'] as const;

const grant = z.object({
  id: z.string().describe('Grant id, grt_…: one linked app (the tokens one approval issued)'),
  client_id: z.string().describe("The app's client_id (oac_…)"),
  client_name: z.string().nullable().describe('The name the app registered, or null'),
  redirect_hosts: z.array(z.string()).describe('Hosts the app may return the user to'),
  scope: z.string().describe('The account-wide scope granted'),
  created_at: z.number().int().describe('ms epoch of the approval'),
  last_used_at: z.number().int().nullable().describe('ms epoch the app last got tokens'),
});

export const listGrants = defineOperation({
  name: 'oauthGrants.list',
  method: 'GET',
  path: '/api/oauth/grants',
  auth: MANAGE,
  summary: 'The apps linked to the account over OAuth, newest first.',
  output: z.array(grant),
  handler: (_input, { core, actor }) => core.oauth.grants.list(actor),
});

export const revokeGrant = defineOperation({
  name: 'oauthGrants.revoke',
  method: 'DELETE',
  path: '/api/oauth/grants/:id',
  auth: MANAGE,
  summary: 'Unlink an app: its access and refresh tokens stop working at once.',
  params: z.object({ id: z.string().min(1).max(100) }),
  output: okSchema,
  handler: (input, { core, actor }) => core.oauth.grants.revokeForUser(actor, input.id),
});
