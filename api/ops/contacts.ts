import { z } from 'zod';
import { defineOperation, emailField, okSchema } from '../contract.js';
import { attributesField, contactIdField, contactInput, contactSchema, pageQuery } from './contact-schemas.js';

const AUTH = ['session', 'oauth', 'account_key'] as const;
const idParams = z.object({ id: contactIdField });

export const listContacts = defineOperation({
  name: 'contacts.list',
  method: 'GET',
  path: '/api/contacts',
  auth: AUTH,
  mcp: { title: 'List contacts' },
  summary: 'Contacts, newest first; page with `before` (the last id seen), filter with `search` (email or name).',
  query: pageQuery(500, 100).extend({
    search: z.string().max(200).optional().describe('Substring of the email or name'),
  }),
  output: z.array(contactSchema),
  handler: (input, { core, actor }) => core.contacts.list(actor, input),
});

export const createContact = defineOperation({
  name: 'contacts.create',
  method: 'POST',
  path: '/api/contacts',
  auth: AUTH,
  status: 201,
  idempotencyKey: true,
  mcp: { title: 'Create a contact' },
  summary:
    "Create a contact; 409 contact_exists when the address is one already, 403 contacts_limit past the account's contact cap (CONTACTS_PER_ACCOUNT).",
  body: contactInput.extend({ subscribed: z.boolean().optional() }),
  output: contactSchema,
  handler: (input, { core, actor }) => core.contacts.create(actor, input),
});

export const readContact = defineOperation({
  name: 'contacts.get',
  method: 'GET',
  path: '/api/contacts/:id',
  auth: AUTH,
  mcp: { title: 'Read a contact' },
  summary: 'One contact.',
  params: idParams,
  output: contactSchema,
  handler: (input, { core, actor }) => core.contacts.get(actor, input.id),
});

export const updateContact = defineOperation({
  name: 'contacts.update',
  method: 'PATCH',
  path: '/api/contacts/:id',
  auth: AUTH,
  summary: 'Change the email, name, attributes (replaced as a whole) or subscription of a contact.',
  params: idParams,
  body: z.strictObject({
    email: emailField.optional(),
    name: z.string().max(200).nullable().optional(),
    attributes: attributesField.optional(),
    subscribed: z.boolean().optional().describe('false unsubscribes the contact from broadcasts; true resubscribes'),
  }),
  output: contactSchema,
  handler: ({ id, ...patch }, { core, actor }) => core.contacts.update(actor, id, patch),
});

export const deleteContact = defineOperation({
  name: 'contacts.delete',
  method: 'DELETE',
  path: '/api/contacts/:id',
  auth: AUTH,
  summary: 'Delete a contact and its list memberships.',
  params: idParams,
  output: okSchema,
  handler: (input, { core, actor }) => core.contacts.remove(actor, input.id),
});
