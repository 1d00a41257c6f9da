import { z } from 'zod';
import { defineOperation } from '../contract.js';

export const listOutbox = defineOperation({
  name: 'outbox.list',
  method: 'GET',
  path: '/api/outbox',
  auth: ['session', 'oauth', 'account_key'],
  summary:
    'OUTBOUND_MODE=capture: the messages captured for this account (its sends and the service mail to it), newest first.',
  query: z.object({
    limit: z.coerce.number().int().min(1).max(100).default(20),
    before: z.coerce.number().int().positive().optional().describe('Only messages captured before this ms epoch'),
  }),
  output: z.array(
    z.object({
      id: z.string().describe('msg_… id of the captured message'),
      from: z.string(),
      to: z.array(z.string()),
      subject: z.string().nullable(),
      text: z.string().nullable().describe('The plain-text body as written (the raw source may be quoted-printable)'),
      raw: z.string().describe('RFC 5322 source as it would have been sent'),
      capturedAt: z.number().int(),
    }),
  ),
  handler: (input, { core, actor }) => core.outbox.list(actor, input),
});
