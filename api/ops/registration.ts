import { z } from 'zod';
import { defineOperation } from '../contract.js';
import { dnsRecord, domainRow } from './domain-schemas.js';
import { DOMAIN_AUTH } from './domains.js';

const regionNames = new Intl.DisplayNames(['en'], { type: 'region' });
const isCountry = (c: string) =>
  /^[A-Z]{2}$/.test(c) && regionNames.of(c) !== c && regionNames.of(c) !== 'Unknown Region';

const price = z.object({
  amount: z.number(),
  currency: z.string().length(3),
  period: z.number().int(),
  periodUnit: z.enum(['y', 'm']),
});

export const contactSchema = z
  .strictObject({
    firstName: z.string().trim().min(1).max(100),
    lastName: z.string().trim().min(1).max(100),
    email: z
      .string()
      .trim()
      .max(254)
      .pipe(z.email({ message: 'must be a valid email address' })),
    phone: z.string().regex(/^\+\d{1,3}\.\d{4,14}$/, 'must look like +<country code>.<number>, e.g. +1.4155550100'),
    address: z.string().trim().min(1).max(200),
    city: z.string().trim().min(1).max(100),
    zip: z.string().trim().min(1).max(20),
    country: z.string().refine(isCountry, 'must be an ISO 3166-1 alpha-2 country code, e.g. US'),
    state: z
      .string()
      .regex(/^[A-Z]{2}-[A-Z0-9]{1,3}$/, 'must be an ISO 3166-2 subdivision code, e.g. US-CA')
      .optional(),
    organization: z.string().trim().min(1).max(200).optional(),
    type: z.enum(['individual', 'company', 'association', 'publicbody']).optional(),
  })
  .refine((c) => !c.state || c.state.startsWith(`${c.country}-`), {
    message: 'state must be a subdivision of country',
    path: ['state'],
  });

export const checkRegistration = defineOperation({
  name: 'registration.check',
  method: 'GET',
  path: '/api/domains/register/check',
  auth: DOMAIN_AUTH,
  summary:
    'Availability and price of a domain to buy (read-only, no charge). configured is false when registration is unavailable.',
  query: z.object({ domain: z.string({ message: 'domain is required' }).min(1).max(253) }),
  output: z.object({
    configured: z.boolean(),
    domain: z.string(),
    available: z.boolean(),
    premium: z.boolean().describe('Premium names cannot be registered'),
    reason: z.string(),
    price: price.optional(),
  }),
  handler: (input, { core }) => core.registration.check(input.domain),
});

export const register = defineOperation({
  name: 'registration.register',
  method: 'POST',
  path: '/api/domains/register',
  auth: DOMAIN_AUTH,
  idempotencyKey: true,
  summary: 'Buy a domain, host its mail DNS and add it, in one call. dryRun validates and prices without charging.',
  body: z.strictObject({
    domain: z.string().min(1).max(253),
    contact: contactSchema,
    years: z.number().int().min(1).max(10).default(1),
    dryRun: z.boolean().default(false),
  }),
  output: z.union([
    z.object({
      registration: z.object({
        status: z.literal('dry_run'),
        reference: z.null(),
        domain: z.string(),
        charge: z.object({ amount: z.number(), currency: z.string(), years: z.number().int() }),
      }),
      dryRun: z.literal(true),
    }),
    z.object({
      registration: z.object({ status: z.string(), reference: z.string().nullable() }),
      domain: domainRow,
      dns: z.array(dnsRecord),
      charge: z.object({ amount: z.number(), currency: z.string(), years: z.number().int() }),
    }),
  ]),
  handler: (input, { core, actor }) => core.registration.register(actor, input),
});
