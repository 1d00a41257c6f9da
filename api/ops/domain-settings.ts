import { z } from 'zod';
import { defineOperation } from '../contract.js';
import { domainIdParams, domainRow } from './domain-schemas.js';
import { DOMAIN_AUTH } from './domains.js';

const flag = z.union([z.literal(0), z.literal(1), z.boolean()]);

export const updateDomain = defineOperation({
  name: 'domains.update',
  method: 'PATCH',
  path: '/api/domains/:id',
  auth: DOMAIN_AUTH,
  summary:
    "Set a domain's zero_retention and/or track_opens (0/1 or a boolean) and/or tls (opportunistic or enforced); answers the stored row.",
  params: domainIdParams,
  body: z
    .strictObject({
      zero_retention: flag
        .optional()
        .describe('1: inbound mail goes to the webhook and is never stored (no replay, no history)'),
      track_opens: flag
        .optional()
        .describe('Domain-wide default for open tracking; a per-send trackOpens overrides it'),
      tls: z
        .enum(['opportunistic', 'enforced'])
        .optional()
        .describe(
          "enforced: the domain's mail leaves only over TLS with a certificate valid for the MX, else it is deferred and finally bounced (tls_required); opportunistic (default): TLS when offered",
        ),
    })
    .refine(
      (b) => b.zero_retention !== undefined || b.track_opens !== undefined || b.tls !== undefined,
      'give zero_retention, track_opens and/or tls',
    ),
  output: z.object({ domain: domainRow }),
  handler: ({ id, ...input }, { core, actor }) => core.domainSettings.update(actor, id, input),
});
