import { z } from 'zod';
import { defineOperation, okSchema } from '../contract.js';
import { domainIdParams } from './domain-schemas.js';
import { DOMAIN_AUTH } from './domains.js';

const score = z.number().min(-1000).max(1000).nullable();

const policy = z.object({
  domain_id: z.string(),
  spam_hold_score: score.describe('Spam score at or above which mail is held (quarantine); null: never'),
  spam_refuse_score: score.describe(
    'Spam score at or above which mail is refused 550 5.7.1 at the end of DATA; null: never',
  ),
  refuse_dmarc_reject: z.boolean().describe('Refuse mail failing DMARC whose From domain publishes p=reject'),
});

const rule = z.object({
  id: z.string().describe('sbr_…'),
  domain_id: z.string(),
  kind: z.enum(['address', 'domain', 'ip']),
  value: z.string().describe('A lowercased address, a domain (and its subdomains), or an IP address or CIDR'),
  action: z.enum(['block', 'allow']),
  origin: z.enum(['api', 'webhook-reply']).describe("api, or a webhook consumer's block-sender reply"),
  note: z.string().nullable(),
  created_at: z.number().int(),
});

const heldMessage = z.object({
  id: z.string().describe('msg_…'),
  domain_id: z.string().nullable(),
  from: z.string().nullable(),
  envelope_from: z.string().nullable(),
  to: z.array(z.string()),
  subject: z.string().nullable().describe('null on zero-retention and encrypted domains'),
  held_reason: z.string().nullable(),
  held_until: z.number().int().nullable().describe('When the expiry sweep deletes it (ms since the epoch)'),
  spam: z.record(z.string(), z.unknown()).nullable().describe("The spam filter's verdict"),
  auth: z.record(z.string(), z.string().nullable()).nullable(),
  received_at: z.number().int().nullable(),
});

const heldParams = z.object({ id: z.string().regex(/^msg_[A-Za-z0-9_-]+$/, 'not a message id (msg_…)') });

export const getInboundPolicy = defineOperation({
  name: 'inboundPolicy.get',
  method: 'GET',
  path: '/api/domains/:id/inbound-policy',
  auth: DOMAIN_AUTH,
  mcp: { title: "Read a domain's inbound policy" },
  summary: "A domain's spam thresholds (hold, refuse) and whether a DMARC fail of a p=reject sender is refused.",
  params: domainIdParams,
  output: z.object({ policy }),
  handler: ({ id }, { core, actor }) => core.inboundPolicy.getPolicy(actor, id),
});

export const updateInboundPolicy = defineOperation({
  name: 'inboundPolicy.update',
  method: 'PATCH',
  path: '/api/domains/:id/inbound-policy',
  auth: DOMAIN_AUTH,
  mcp: { title: "Set a domain's inbound policy" },
  summary:
    "Set a domain's spam_hold_score, spam_refuse_score (a number, or null for never) and/or refuse_dmarc_reject; answers the policy.",
  params: domainIdParams,
  body: z
    .strictObject({
      spam_hold_score: score.optional(),
      spam_refuse_score: score.optional(),
      refuse_dmarc_reject: z.boolean().optional(),
    })
    .refine(
      (b) =>
        b.spam_hold_score !== undefined || b.spam_refuse_score !== undefined || b.refuse_dmarc_reject !== undefined,
      'give spam_hold_score, spam_refuse_score and/or refuse_dmarc_reject',
    ),
  output: z.object({ policy }),
  handler: ({ id, ...input }, { core, actor }) => core.inboundPolicy.updatePolicy(actor, id, input),
});

export const listSenderRules = defineOperation({
  name: 'senderRules.list',
  method: 'GET',
  path: '/api/domains/:id/sender-rules',
  auth: DOMAIN_AUTH,
  mcp: { title: "List a domain's sender rules" },
  summary: "A domain's sender rules (block or allow by address, domain or IP/CIDR), oldest first.",
  params: domainIdParams,
  output: z.object({ data: z.array(rule) }),
  handler: ({ id }, { core, actor }) => core.inboundPolicy.listRules(actor, id),
});

export const createSenderRule = defineOperation({
  name: 'senderRules.create',
  method: 'POST',
  path: '/api/domains/:id/sender-rules',
  auth: DOMAIN_AUTH,
  status: 201,
  mcp: { title: 'Add a sender rule' },
  summary:
    'Block or allow a sender on a domain by address, domain (and its subdomains) or IP/CIDR; a blocked sender is refused 550 5.7.1 at SMTP, an allowed one passes the spam thresholds. The same kind and value again updates the action.',
  params: domainIdParams,
  body: z.strictObject({
    kind: z.enum(['address', 'domain', 'ip']),
    value: z.string().min(1).max(320),
    action: z.enum(['block', 'allow']),
    note: z.string().max(500).nullable().optional(),
  }),
  output: z.object({ rule }),
  handler: ({ id, ...input }, { core, actor }) => core.inboundPolicy.createRule(actor, id, input),
});

export const deleteSenderRule = defineOperation({
  name: 'senderRules.delete',
  method: 'DELETE',
  path: '/api/domains/:id/sender-rules/:ruleId',
  auth: DOMAIN_AUTH,
  mcp: { title: 'Delete a sender rule' },
  summary: 'Delete a sender rule of a domain.',
  params: domainIdParams.extend({ ruleId: z.string().min(1).max(100) }),
  output: okSchema,
  handler: ({ id, ruleId }, { core, actor }) => core.inboundPolicy.deleteRule(actor, id, ruleId),
});

export const listHeld = defineOperation({
  name: 'heldMessages.list',
  method: 'GET',
  path: '/api/inbound/held',
  auth: DOMAIN_AUTH,
  mcp: { title: 'List held inbound mail' },
  summary: "Inbound mail the domains' policy held (quarantine), newest first; kept QUARANTINE_DAYS, then deleted.",
  query: z.object({
    domain_id: z.string().max(100).optional(),
    limit: z.coerce.number().int().min(1).max(100).optional(),
  }),
  output: z.object({ data: z.array(heldMessage) }),
  handler: (input, { core, actor }) => core.quarantine.list(actor, input),
});

export const releaseHeld = defineOperation({
  name: 'heldMessages.release',
  method: 'POST',
  path: '/api/inbound/held/:id/release',
  auth: DOMAIN_AUTH,
  mcp: { title: 'Release held inbound mail' },
  summary:
    'Deliver a held message once, to its mailbox, forward routes and webhooks, as if it had just arrived; a second release answers 409 already_released.',
  params: heldParams,
  output: z.object({ released: z.literal(true), message: heldMessage }),
  handler: ({ id }, { core, actor }) => core.quarantine.release(actor, id),
});

export const deleteHeld = defineOperation({
  name: 'heldMessages.delete',
  method: 'DELETE',
  path: '/api/inbound/held/:id',
  auth: DOMAIN_AUTH,
  mcp: { title: 'Delete held inbound mail' },
  summary: 'Delete a held message and its stored copy.',
  params: heldParams,
  output: okSchema,
  handler: ({ id }, { core, actor }) => core.quarantine.delete(actor, id),
});
