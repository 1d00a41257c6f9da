import { z } from 'zod';
import { defineOperation, okSchema } from '../contract.js';

const MANAGE = ['session', 'oauth', 'account_key'] as const;

const scopedKey = z.object({
  id: z.string().describe('key_…'),
  user_id: z.string(),
  domain_id: z.string(),
  domain: z.string(),
  name: z.string(),
  key: z.string().describe('svc_live_…, in full'),
  created_at: z.number().int(),
  last_used_at: z.number().int().nullable(),
});

export const listScopedKeys = defineOperation({
  name: 'scopedKeys.list',
  method: 'GET',
  path: '/api/keys/scoped',
  auth: MANAGE,
  summary: 'Domain-scoped keys of the account.',
  output: z.array(scopedKey),
  handler: (_i, { core, actor }) => core.scopedKeys.list(actor),
});

export const createScopedKey = defineOperation({
  name: 'scopedKeys.create',
  method: 'POST',
  path: '/api/keys/scoped',
  auth: MANAGE,
  status: 201,
  idempotencyKey: true,
  summary: 'Create a key that can send from and manage only one domain of the account.',
  body: z.strictObject({
    domainId: z.string().regex(/^dom_/, 'must be a domain id (dom_…)'),
    name: z.string().min(1).max(100).optional(),
  }),
  output: scopedKey,
  handler: (input, { core, actor }) => core.scopedKeys.create(actor, input),
});

export const revokeScopedKey = defineOperation({
  name: 'scopedKeys.revoke',
  method: 'DELETE',
  path: '/api/keys/scoped/:id',
  auth: MANAGE,
  summary: 'Revoke a scoped key; effective immediately.',
  params: z.object({ id: z.string().min(1).max(100) }),
  output: okSchema,
  handler: (input, { core, actor }) => core.scopedKeys.revoke(actor, input.id),
});
