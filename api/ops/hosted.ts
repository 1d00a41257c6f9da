import { z } from 'zod';
import { defineOperation } from '../contract.js';
import { dnsRecord, domainRow } from './domain-schemas.js';
import { DOMAIN_AUTH } from './domains.js';

export const suggestSubdomain = defineOperation({
  name: 'subdomains.suggest',
  method: 'GET',
  path: '/api/domains/subdomain/suggest',
  auth: DOMAIN_AUTH,
  summary: 'A free hosted subdomain label (read-only; does not reserve it).',
  output: z.object({
    subdomain: z.string(),
    domain: z.string(),
    base: z.string().describe('The hosted zone; always read it from here'),
  }),
  handler: (_i, { core }) => core.hosted.suggest(),
});

export const checkSubdomain = defineOperation({
  name: 'subdomains.check',
  method: 'GET',
  path: '/api/domains/subdomain/check',
  auth: DOMAIN_AUTH,
  summary: 'Is a hosted subdomain label available? Reasons are safe to show verbatim.',
  query: z.object({
    name: z.string({ message: 'name is required' }).max(300).describe('The label, or <label>.<base>'),
  }),
  output: z.object({ available: z.boolean(), reason: z.string().optional(), domain: z.string().optional() }),
  handler: (input, { core }) => core.hosted.check(input.name),
});

export const claimSubdomain = defineOperation({
  name: 'subdomains.claim',
  method: 'POST',
  path: '/api/domains/subdomain',
  auth: DOMAIN_AUTH,
  status: 201,
  idempotencyKey: true,
  summary:
    'Claim a hosted subdomain: created verified with all four checks passing; its records are hosted by the service.',
  body: z.strictObject({
    subdomain: z.string().min(1).max(300).describe('3 to 32 of a-z, 0-9 and hyphens; <label>.<base> also accepted'),
  }),
  output: z.object({ domain: domainRow, dns: z.array(dnsRecord).max(0) }),
  handler: (input, { core, actor }) => core.hosted.claim(actor, input.subdomain),
});
