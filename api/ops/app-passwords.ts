import { z } from 'zod';
import { defineOperation, okSchema } from '../contract.js';

const MANAGE = ['session', 'oauth', 'account_key'] as const;
const protocols = z
  .array(z.enum(['imap', 'api', 'smtp']))
  .min(1)
  .max(3)
  .describe(
    'imap = IMAP LOGIN; api = Bearer on /api/mailbox/*; smtp = AUTH on the submission server (sends as the addresses it covers)',
  );
const address = z
  .string()
  .min(1)
  .max(64)
  .describe('Local-part pattern: *, an exact local part, support-*, *-agent; no @');

const appPassword = z.object({
  id: z.string().describe('apw_…'),
  user_id: z.string(),
  label: z.string(),
  domain_id: z.string().nullable(),
  domain: z.string().describe('Domain name; * for a legacy account-wide IMAP credential'),
  address: z.string(),
  protocols: z.array(z.enum(['imap', 'api', 'smtp'])),
  key_prefix: z.string(),
  created_at: z.number().int(),
  last_used_at: z.number().int().nullable(),
  legacy: z.boolean(),
});
const withSecret = appPassword.extend({ secret: z.string().describe('svc_pw_…; shown only here, never again') });
const idParam = z.object({ id: z.string().min(1).max(100) });

export const listAppPasswords = defineOperation({
  name: 'appPasswords.list',
  method: 'GET',
  path: '/api/app-passwords',
  auth: MANAGE,
  summary: 'App passwords of the account (without secrets).',
  output: z.array(appPassword),
  handler: (_i, { core, actor }) => core.appPasswords.list(actor),
});

export const createAppPassword = defineOperation({
  name: 'appPasswords.create',
  method: 'POST',
  path: '/api/app-passwords',
  auth: MANAGE,
  status: 201,
  idempotencyKey: true,
  summary: 'Mint a mailbox password for one domain and an address pattern; the secret is returned once.',
  body: z.strictObject({
    domain: z.string().min(1).max(253).optional().describe('Domain name of the account (or give domainId)'),
    domainId: z.string().regex(/^dom_/, 'must be a domain id (dom_…)').optional(),
    address: address.optional().describe('Default *'),
    protocols: protocols.optional().describe('Default ["imap"]'),
    label: z.string().min(1).max(100).optional(),
  }),
  output: withSecret,
  handler: (input, { core, actor }) => core.appPasswords.create(actor, input),
});

export const updateAppPassword = defineOperation({
  name: 'appPasswords.update',
  method: 'PATCH',
  path: '/api/app-passwords/:id',
  auth: MANAGE,
  summary: 'Change the address pattern, protocols (replacing the set) or label; the domain cannot change.',
  params: idParam,
  body: z.strictObject({
    address: address.optional(),
    protocols: protocols.optional(),
    label: z.string().min(1).max(100).optional(),
  }),
  output: appPassword,
  handler: ({ id, ...input }, { core, actor }) => core.appPasswords.update(actor, id, input),
});

export const rotateAppPassword = defineOperation({
  name: 'appPasswords.rotate',
  method: 'POST',
  path: '/api/app-passwords/:id/rotate',
  auth: MANAGE,
  summary: 'New secret, same scope; the old secret and its open IMAP sessions stop at once.',
  params: idParam,
  output: withSecret,
  handler: ({ id }, { core, actor }) => core.appPasswords.rotate(actor, id),
});

export const deleteAppPassword = defineOperation({
  name: 'appPasswords.delete',
  method: 'DELETE',
  path: '/api/app-passwords/:id',
  auth: MANAGE,
  summary: 'Delete an app password; IMAP sessions and API calls using it stop at once.',
  params: idParam,
  output: okSchema,
  handler: ({ id }, { core, actor }) => core.appPasswords.remove(actor, id),
});
