import { z } from 'zod';
import { actorOf } from '../../core/domains/service.js';
import { defineOperation, okSchema } from '../contract.js';
import { dnsRecord, domainIdParams, domainRow, enrichedDomain } from './domain-schemas.js';

/** Domain routes take a session, an OAuth token, the account key, or a scoped key (its own domain only). */
export const DOMAIN_AUTH = ['session', 'oauth', 'account_key', 'scoped_key'] as const;

export const listDomains = defineOperation({
  name: 'domains.list', method: 'GET', path: '/api/domains', auth: DOMAIN_AUTH,
  summary: 'The account\'s domains with enrichment (a scoped key sees its one domain).',
  output: z.array(enrichedDomain),
  handler: (_i, { core, principal }) => core.domains.list(actorOf(principal!)),
});

export const addDomain = defineOperation({
  name: 'domains.add', method: 'POST', path: '/api/domains', auth: DOMAIN_AUTH, status: 201,
  summary: 'Add a domain: answers the DNS records to publish and starts the verification loop.',
  body: z.strictObject({
    domain: z.string().min(1).max(253).describe('Domain name, e.g. example.com'),
    email_provider_id: z.string().min(1).max(64).optional().describe('Paid plans only: the sending provider instance'),
  }),
  output: z.object({ domain: domainRow, dns: z.array(dnsRecord), warnings: z.array(z.string()).optional() }),
  handler: (input, { core, principal }) => core.domains.add(actorOf(principal!), input),
});

export const getDomain = defineOperation({
  name: 'domains.get', method: 'GET', path: '/api/domains/:id', auth: DOMAIN_AUTH,
  summary: 'One domain with enrichment and its DNS records.',
  params: domainIdParams,
  output: z.object({ domain: enrichedDomain, dns: z.array(dnsRecord) }),
  handler: (input, { core, principal }) => core.domains.get(actorOf(principal!), input.id),
});

export const deleteDomain = defineOperation({
  name: 'domains.delete', method: 'DELETE', path: '/api/domains/:id', auth: DOMAIN_AUTH,
  summary: 'Delete a domain; provider and hosted-DNS teardown is best effort and reported in cleanup.',
  params: domainIdParams,
  output: okSchema.extend({
    cleanup: z.object({ deregistered: z.array(z.string()), dnsDeleted: z.number().int(), warnings: z.array(z.string()) }),
  }),
  handler: (input, { core, principal }) => core.domains.remove(actorOf(principal!), input.id),
});

export const verifyDomain = defineOperation({
  name: 'domains.verify', method: 'POST', path: '/api/domains/:id/verify', auth: DOMAIN_AUTH,
  summary: 'Check DNS now. MX alone verifies the domain (inbound); SPF + DKIM enable sending.',
  params: domainIdParams,
  output: z.object({
    status: z.enum(['verified', 'pending']),
    checks: z.object({
      mx: z.boolean(), spf: z.boolean(), dkim: z.boolean(), dmarc: z.boolean(),
      ownership: z.boolean().describe('The account\'s _svc-verify TXT token is published; nothing else counts before it'),
    }),
    checkedAt: z.number().int(),
    sending: z.object({
      ok: z.boolean(), enabled: z.boolean().optional(), dkimVerified: z.boolean().optional(), alreadyEnabled: z.boolean().optional(),
      providerId: z.string().optional(), error: z.string().optional(),
    }),
  }),
  handler: (input, { core, principal }) => core.domains.verifyNow(actorOf(principal!), input.id),
});
