import { z } from 'zod';
import { emailField } from '../contract.js';

/** Schemas shared by the contact and list operations. */
export const scalar = z.union([z.string().max(2000), z.number(), z.boolean(), z.null()]);
export const attributesField = z
  .record(z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'attribute keys: letters, digits, _ and -, at most 64'), scalar)
  .refine((a) => Object.keys(a).length <= 100, 'at most 100 attributes')
  .describe('Custom attributes (scalars), addressable in merge tags as {{key}} and in filters as attributes.<key>');
export const contactIdField = z
  .string()
  .regex(/^ctc_[A-Za-z0-9_-]{20,}$/, 'a contact id (ctc_…)')
  .describe('ctc_…');
export const listIdField = z
  .string()
  .regex(/^lst_[A-Za-z0-9_-]{20,}$/, 'a list id (lst_…)')
  .describe('lst_…');
export const contactSchema = z.object({
  id: z.string().describe('ctc_…'),
  email: z.string(),
  name: z.string().nullable(),
  attributes: z.record(z.string(), scalar),
  subscribed: z.boolean().describe('false once the contact unsubscribed from broadcasts'),
  unsubscribed_at: z.number().int().nullable(),
  created_at: z.number().int(),
  updated_at: z.number().int(),
  last_seen_at: z.number().int().nullable().describe('Last mail to or from the address (ms epoch)'),
});
export const contactInput = z.strictObject({
  email: emailField,
  name: z.string().max(200).optional(),
  attributes: attributesField.optional(),
});
export const pageQuery = (max: number, dflt: number) =>
  z.object({
    before: contactIdField.optional().describe('Cursor: the id of the last contact of the previous page'),
    limit: z.coerce.number().int().min(1).max(max).default(dflt),
  });
