import { z } from 'zod';
import { defineOperation } from '../contract.js';
import { domainFeedback, domainIdParams } from './domain-schemas.js';
import { DOMAIN_AUTH } from './domains.js';

export const resumeSending = defineOperation({
  name: 'domains.resumeSending',
  method: 'POST',
  path: '/api/domains/:id/resume-sending',
  auth: DOMAIN_AUTH,
  mcp: { title: "Resume a domain's paused broadcasts and sequences", idempotent: true },
  summary:
    "Resume the domain's bulk mail (broadcasts, sequences) after the complaint guard paused it: paused broadcasts go on from where they stopped and held copies leave. The guard then judges only what is counted after the resume.",
  params: domainIdParams,
  output: z.object({ domainId: z.string(), feedback: domainFeedback }),
  handler: (input, { core, actor }) => core.feedbackGuard.resume(actor, input.id),
});
