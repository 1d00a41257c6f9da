import { z } from 'zod';
import { defineOperation, okSchema } from '../contract.js';
import { domainIdParams, domainRow } from './domain-schemas.js';
import { DOMAIN_AUTH } from './domains.js';

export const setEncryption = defineOperation({
  name: 'domains.setEncryption',
  method: 'PUT',
  path: '/api/domains/:id/encryption',
  auth: DOMAIN_AUTH,
  summary: "Set the domain's at-rest encryption key: inbound messages are stored only encrypted from then on.",
  params: domainIdParams,
  body: z.strictObject({
    publicKey: z
      .string()
      .min(1)
      .max(100_000)
      .describe(
        'PEM SPKI RSA public key (≥ 2048 bits, RSA-OAEP-256 envelope), armored OpenPGP public key (PGP), or PEM X.509 certificate with an RSA key (S/MIME)',
      ),
  }),
  output: z.object({ domain: domainRow }),
  handler: async (input, { core, actor }) => ({
    domain: await core.encryption.setKey(actor, input.id, input.publicKey),
  }),
});

export const clearEncryption = defineOperation({
  name: 'domains.clearEncryption',
  method: 'DELETE',
  path: '/api/domains/:id/encryption',
  auth: DOMAIN_AUTH,
  summary: "Clear the domain's encryption key: messages received afterwards are stored unencrypted.",
  params: domainIdParams,
  output: okSchema,
  handler: (input, { core, actor }) => core.encryption.clearKey(actor, input.id),
});
