import { z } from 'zod';
import { unauthorized } from '../../core/errors.js';
import { defineOperation } from '../contract.js';

export const me = defineOperation({
  name: 'me.get',
  method: 'GET',
  path: '/v1/me',
  auth: ['account_key', 'scoped_key', 'session', 'oauth'],
  mcp: { name: 'me', title: 'Account status and the domains it may send from' },
  summary: 'Account status as seen by this credential.',
  output: z.object({
    email: z.string(),
    emailVerified: z.boolean().describe('Sending is blocked until true'),
    plan: z.string(),
    sendingDomains: z.array(z.string()).describe('Outbound-verified domains this credential may use in From'),
  }),
  handler: async (_input, { core, actor }) => {
    const user = await core.accounts.getUser(actor.userId);
    if (!user) throw unauthorized();
    return {
      email: user.email,
      emailVerified: user.emailVerified,
      plan: user.plan,
      sendingDomains: await core.domains.sendingDomains(actor),
    };
  },
});

export const usage = defineOperation({
  name: 'billing.usage',
  method: 'GET',
  path: '/api/billing/usage',
  auth: ['session', 'oauth', 'account_key'],
  summary:
    'Usage against the plan: the monthly email bucket (inbound and outbound share it), overage state, and storage (mailboxes and attachments) against the quota.',
  output: z.object({
    plan: z.string(),
    emails: z.object({ used: z.number(), included: z.number().nullable().describe('null = unlimited') }),
    aiActions: z.object({ used: z.number() }),
    meteringEnabled: z.boolean(),
    meters: z.array(z.string()),
    overage: z.object({
      over: z.boolean(),
      metered: z.boolean(),
      blocked: z.boolean(),
      status: z
        .string()
        .nullable()
        .describe(
          'Card-gate status when over: ok (metered overage goes on) or failed (sending blocked); null when not over',
        ),
      code: z.string().nullable().describe('When blocked: monthly_quota_exceeded, the code of the send refusal (402)'),
    }),
    storage: z.object({
      used: z
        .number()
        .describe(
          'Bytes in use: stored mail (one body per inbound message however many mailboxes hold it; each Sent copy, APPEND and COPY its own; the sealed copies of encrypted domains) plus unexpired stored attachments',
        ),
      mailboxes: z.number(),
      attachments: z.number(),
      quota: z
        .number()
        .describe(
          'STORAGE_QUOTA_BYTES; IMAP APPEND/COPY answer NO [OVERQUOTA], uploads 413 storage_quota_exceeded and inbound SMTP 452 4.2.2 past it',
        ),
    }),
  }),
  handler: async (_input, { core, actor }) => {
    const user = await core.accounts.getUser(actor.userId);
    if (!user) throw unauthorized();
    return { ...(await core.usage.usage(user)), storage: await core.storage.usage(user.id) };
  },
});

const settings = z.object({
  footerAddress: z
    .string()
    .nullable()
    .describe(
      "Postal address of the CAN-SPAM footer; prefills a new broadcast's footer_address (null: the operator's BROADCAST_FOOTER_ADDRESS)",
    ),
});

export const getSettings = defineOperation({
  name: 'account.settings',
  method: 'GET',
  path: '/api/account/settings',
  auth: ['session', 'oauth', 'account_key'],
  summary: 'Account settings that prefill new records (the CAN-SPAM footer address of broadcasts).',
  output: settings,
  handler: async (_input, { core, actor }) => ({ footerAddress: await core.accounts.footerAddress(actor.userId) }),
});

export const updateSettings = defineOperation({
  name: 'account.updateSettings',
  method: 'PATCH',
  path: '/api/account/settings',
  auth: ['session', 'oauth', 'account_key'],
  summary:
    "Set the account's CAN-SPAM footer address (null or an empty string clears it); drafts created afterwards are prefilled with it.",
  body: z.strictObject({ footerAddress: z.string().max(500).nullable() }),
  output: settings,
  handler: async (input, { core, actor }) => ({
    footerAddress: await core.accounts.setFooterAddress(actor.userId, input.footerAddress),
  }),
});
