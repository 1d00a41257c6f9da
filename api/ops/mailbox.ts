import { z } from 'zod';
import { defineOperation, okSchema } from '../contract.js';

const AUTH = ['app_password'] as const;
const uidParam = z.object({
  uid: z.coerce
    .number()
    .int()
    .min(1)
    .max(2 ** 32 - 1),
});

const message = z.object({
  uid: z.number().int().describe('Also the IMAP UID'),
  flags: z.string().describe('Space-separated IMAP flags without leading backslash'),
  internaldate: z.string().describe('ISO 8601'),
  from_addr: z.string().describe('Envelope sender'),
  to_addr: z.string().describe('Mailbox address the copy was filed for'),
  subject: z.string().nullable(),
  size: z.number().int().nullable(),
});

export const listMailboxMessages = defineOperation({
  name: 'mailbox.list',
  method: 'GET',
  path: '/api/mailbox/messages',
  auth: AUTH,
  mcp: { title: 'List mailbox messages' },
  summary: 'Messages of the mailboxes the app password covers, newest first.',
  query: z.object({
    before: z.coerce
      .number()
      .int()
      .min(1)
      .optional()
      .describe('Exclusive UID cursor: the nextBefore of the previous page'),
    limit: z.coerce.number().int().min(1).max(200).optional().describe('1–200, default 50'),
    address: z.string().min(3).max(320).optional().describe('Only this address (it must be covered by the password)'),
    mailbox: z.enum(['INBOX', 'Sent']).optional().describe('Default INBOX'),
  }),
  output: z.object({ messages: z.array(message), nextBefore: z.number().int().nullable() }),
  handler: (q, { core, principal }) => core.mailboxes.list(principal.scope, q),
});

export const rawMailboxMessage = defineOperation({
  name: 'mailbox.raw',
  method: 'GET',
  path: '/api/mailbox/messages/:uid/raw',
  auth: AUTH,
  mcp: { title: 'Read a mailbox message (RFC 822 source)' },
  summary: 'The RFC 822 source of one message (send Accept: message/rfc822 for the bytes themselves).',
  params: uidParam,
  output: z.object({ uid: z.number().int(), raw: z.string() }),
  handler: async ({ uid }, { core, principal }) => {
    const { row } = await core.mailboxes.message(principal.scope, uid);
    return { uid, raw: row.raw.toString('utf8') };
  },
});

export const setMailboxFlags = defineOperation({
  name: 'mailbox.setFlags',
  method: 'POST',
  path: '/api/mailbox/messages/:uid/flags',
  auth: AUTH,
  summary: 'Replace the flag set of one message (the flags IMAP clients see).',
  params: uidParam,
  body: z.strictObject({
    flags: z.string().max(2000).describe('The complete space-separated set, no leading backslashes: "Seen Flagged"'),
  }),
  output: okSchema,
  handler: ({ uid, flags }, { core, principal }) => core.mailboxes.replaceFlags(principal.scope, uid, flags),
});
