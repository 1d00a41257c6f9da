import { z } from 'zod';
import { defineOperation, emailField, okSchema } from '../contract.js';

const AUTH = ['session', 'oauth', 'account_key'] as const;
const suppression = z.object({
  id: z.string(),
  email: z.string(),
  reason: z.string().describe('hard_bounce, complaint, manual, …'),
  messageId: z.string().nullable(),
  detail: z.string().nullable(),
  createdAt: z.number().int(),
});

export const listSuppressions = defineOperation({
  name: 'suppressions.list',
  method: 'GET',
  path: '/api/contacts/suppressions',
  auth: AUTH,
  mcp: { title: 'List suppressed addresses' },
  summary: 'Addresses sends to which are refused, newest first.',
  output: z.array(suppression),
  handler: (_i, { core, actor }) => core.suppressions.list(actor),
});

export const addSuppression = defineOperation({
  name: 'suppressions.add',
  method: 'POST',
  path: '/api/contacts/suppressions',
  auth: AUTH,
  status: 201,
  idempotencyKey: true,
  mcp: { title: 'Suppress an address', idempotent: true },
  summary: 'Suppress an address by hand (idempotent).',
  body: z.strictObject({ email: emailField, reason: z.string().min(1).max(50).default('manual') }),
  output: okSchema,
  handler: async (input, { core, actor }) => {
    await core.suppressions.add(actor.userId, input.email, input.reason);
    return { ok: true as const };
  },
});

export const removeSuppression = defineOperation({
  name: 'suppressions.remove',
  method: 'DELETE',
  path: '/api/contacts/suppressions/:email',
  auth: AUTH,
  mcp: { title: 'Allow sending to a suppressed address again' },
  summary: 'Allow sending to an address again.',
  params: z.object({ email: emailField }),
  output: okSchema,
  handler: (input, { core, actor }) => core.suppressions.remove(actor, input.email),
});
