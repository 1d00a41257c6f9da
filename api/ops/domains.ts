import { z } from 'zod';
import { defineOperation, okSchema } from '../contract.js';
import { dnsRecord, domainIdParams, domainRow, enrichedDomain, poolWarnings } from './domain-schemas.js';
import { warmupView } from './warmup-schemas.js';

/** Domain routes take a session, an OAuth token, the account key, or a scoped key (its own domain only). */
export const DOMAIN_AUTH = ['session', 'oauth', 'account_key', 'scoped_key'] as const;

export const listDomains = defineOperation({
  name: 'domains.list',
  method: 'GET',
  path: '/api/domains',
  auth: DOMAIN_AUTH,
  mcp: { title: 'List domains' },
  summary: "The account's domains with enrichment (a scoped key sees its one domain).",
  output: z.array(enrichedDomain),
  handler: (_i, { core, actor }) => core.domains.list(actor),
});

export const addDomain = defineOperation({
  name: 'domains.add',
  method: 'POST',
  path: '/api/domains',
  auth: DOMAIN_AUTH,
  status: 201,
  idempotencyKey: true,
  mcp: { title: 'Add a domain (answers the DNS records to publish)' },
  summary: 'Add a domain: answers the DNS records to publish and starts the verification loop.',
  body: z.strictObject({
    domain: z.string().min(1).max(253).describe('Domain name, e.g. example.com'),
    email_provider_id: z
      .string()
      .min(1)
      .max(64)
      .optional()
      .describe(
        "Paid plans: the egress pool to send from (a pool of the operator's egress file; unknown: 400 unknown_provider); free plans are pinned to the platform default (the value is ignored)",
      ),
  }),
  output: z.object({ domain: domainRow, dns: z.array(dnsRecord), warnings: poolWarnings }),
  handler: (input, { core, actor }) => core.domains.add(actor, input),
});

export const getDomain = defineOperation({
  name: 'domains.get',
  method: 'GET',
  path: '/api/domains/:id',
  auth: DOMAIN_AUTH,
  mcp: { title: 'Domain status and the DNS records to publish' },
  summary: 'One domain with enrichment and its DNS records.',
  params: domainIdParams,
  output: z.object({
    domain: enrichedDomain.extend({
      warmup: warmupView
        .nullable()
        .optional()
        .describe('The warm-up plan, when the domain has one (PUT /api/domains/:id/warmup)'),
    }),
    dns: z.array(dnsRecord),
    warnings: poolWarnings,
  }),
  handler: async (input, { core, actor }) => {
    const found = await core.domains.get(actor, input.id);
    return { ...found, domain: { ...found.domain, warmup: await core.warmup.viewOf(actor, input.id) } };
  },
});

export const deleteDomain = defineOperation({
  name: 'domains.delete',
  method: 'DELETE',
  path: '/api/domains/:id',
  auth: DOMAIN_AUTH,
  summary: 'Delete a domain; provider and hosted-DNS teardown is best effort and reported in cleanup.',
  params: domainIdParams,
  output: okSchema.extend({
    cleanup: z.object({
      deregistered: z.array(z.string()),
      dnsDeleted: z.number().int(),
      warnings: z.array(z.string()),
    }),
  }),
  handler: (input, { core, actor }) => core.domains.remove(actor, input.id),
});

export const verifyDomain = defineOperation({
  name: 'domains.verify',
  method: 'POST',
  path: '/api/domains/:id/verify',
  auth: DOMAIN_AUTH,
  mcp: { title: "Check a domain's DNS now", idempotent: true },
  summary: 'Check DNS now. MX alone verifies the domain (inbound); SPF + DKIM enable sending.',
  params: domainIdParams,
  output: z.object({
    status: z.enum(['verified', 'pending']),
    checks: z.object({
      mx: z.boolean(),
      spf: z.boolean(),
      dkim: z.boolean(),
      dmarc: z.boolean(),
      ownership: z
        .boolean()
        .describe(
          "The zone is proven this account's: its MX names the row's own host (or, the older proof, the account's _svc-verify TXT token is published)",
        ),
    }),
    checkedAt: z.number().int(),
    sending: z.object({
      ok: z.boolean(),
      enabled: z.boolean().optional(),
      dkimVerified: z.boolean().optional(),
      alreadyEnabled: z.boolean().optional(),
      providerId: z.string().optional(),
      error: z.string().optional(),
    }),
  }),
  handler: (input, { core, actor }) => core.domains.verifyNow(actor, input.id),
});

export const rotateDkim = defineOperation({
  name: 'domains.rotateDkim',
  method: 'POST',
  path: '/api/domains/:id/dkim/rotate',
  auth: DOMAIN_AUTH,
  mcp: { title: "Rotate a domain's DKIM key" },
  summary:
    'Start a DKIM key rotation: a key under a new selector is published (a customer zone lists it in `dns` and the rotation waits until it resolves), signing switches to it, and the old selector is retired after the grace period.',
  params: domainIdParams,
  output: z.object({
    domain: enrichedDomain,
    dns: z.array(dnsRecord),
    warnings: poolWarnings,
    rotation: z.object({
      selector: z.string().describe('The new selector, signing once its record resolves'),
      previousSelector: z.string().describe('The selector signing now; published until the grace period ends'),
      published: z
        .boolean()
        .describe('True for a hosted zone (published at once); false: publish the new record listed in dns'),
    }),
  }),
  handler: (input, { core, actor }) => core.dkimRotation.request(actor, input.id),
});
