import { z } from 'zod';
import { IMPORT_LIMITS } from '../../core/contacts/imports.js';
import { defineOperation, emailField, okSchema } from '../contract.js';
import { contactIdField, contactInput, contactSchema, listIdField, pageQuery } from './contact-schemas.js';

const AUTH = ['session', 'oauth', 'account_key'] as const;
const list = z.object({
  id: z.string().describe('lst_…'),
  name: z.string(),
  contact_count: z.number().int(),
  created_at: z.number().int(),
  updated_at: z.number().int(),
});
const idParams = z.object({ id: listIdField });
const nameField = z.string().trim().min(1).max(200);
const importSchema = z.object({
  id: z.string().describe('imp_…'),
  list_id: z.string(),
  status: z.enum(['running', 'done', 'failed']),
  rows_read: z.number().int(),
  created: z.number().int(),
  updated: z.number().int(),
  rejected: z.number().int(),
  rejections: z
    .array(z.object({ row: z.number().int().describe('Line in the file (the header is line 1)'), reason: z.string() }))
    .describe('The first 100 rejected rows'),
  created_at: z.number().int(),
  updated_at: z.number().int(),
});

export const listLists = defineOperation({
  name: 'lists.list',
  method: 'GET',
  path: '/api/lists',
  auth: AUTH,
  mcp: { title: 'List contact lists' },
  summary: "The account's lists with their sizes, newest first.",
  output: z.array(list),
  handler: (_i, { core, actor }) => core.lists.list(actor),
});

export const createList = defineOperation({
  name: 'lists.create',
  method: 'POST',
  path: '/api/lists',
  auth: AUTH,
  status: 201,
  idempotencyKey: true,
  mcp: { title: 'Create a contact list' },
  summary: 'Create a list.',
  body: z.strictObject({ name: nameField }),
  output: list,
  handler: (input, { core, actor }) => core.lists.create(actor, input.name),
});

export const readList = defineOperation({
  name: 'lists.get',
  method: 'GET',
  path: '/api/lists/:id',
  auth: AUTH,
  summary: 'One list with its size.',
  params: idParams,
  output: list,
  handler: (input, { core, actor }) => core.lists.get(actor, input.id),
});

export const updateList = defineOperation({
  name: 'lists.update',
  method: 'PATCH',
  path: '/api/lists/:id',
  auth: AUTH,
  summary: 'Rename a list.',
  params: idParams,
  body: z.strictObject({ name: nameField }),
  output: list,
  handler: (input, { core, actor }) => core.lists.rename(actor, input.id, input.name),
});

export const deleteList = defineOperation({
  name: 'lists.delete',
  method: 'DELETE',
  path: '/api/lists/:id',
  auth: AUTH,
  summary: 'Delete a list (its contacts stay).',
  params: idParams,
  output: okSchema,
  handler: (input, { core, actor }) => core.lists.remove(actor, input.id),
});

export const listMembers = defineOperation({
  name: 'lists.contacts',
  method: 'GET',
  path: '/api/lists/:id/contacts',
  auth: AUTH,
  mcp: { title: 'List the contacts of a list' },
  summary: 'Contacts of a list, most recently added first; page with `before` (the last contact id seen).',
  params: idParams,
  query: pageQuery(500, 100),
  output: z.array(contactSchema),
  handler: ({ id, ...q }, { core, actor }) => core.lists.members(actor, id, q),
});

export const addMembers = defineOperation({
  name: 'lists.addContacts',
  method: 'POST',
  path: '/api/lists/:id/contacts',
  auth: AUTH,
  idempotencyKey: true,
  mcp: { title: 'Add contacts to a list', idempotent: true },
  summary:
    'Add contacts by id, by address, or as full contacts (upserted by address). Answers how many joined the list now.',
  params: idParams,
  body: z
    .strictObject({
      contactIds: z.array(contactIdField).max(1000).optional(),
      emails: z.array(emailField).max(1000).optional().describe('Addresses; a contact is created for each new one'),
      contacts: z
        .array(contactInput)
        .max(1000)
        .optional()
        .describe('Contacts upserted by address (name and attributes merged in)'),
    })
    .refine(
      (b) => (b.contactIds?.length ?? 0) + (b.emails?.length ?? 0) + (b.contacts?.length ?? 0) > 0,
      'give contactIds, emails or contacts',
    ),
  output: z.object({
    added: z.number().int().describe('Contacts that were not in the list before'),
    created: z.number().int().describe('Contacts created by this call'),
  }),
  handler: ({ id, ...body }, { core, actor }) => core.lists.addMembers(actor, id, body),
});

export const removeMember = defineOperation({
  name: 'lists.removeContact',
  method: 'DELETE',
  path: '/api/lists/:id/contacts/:cid',
  auth: AUTH,
  summary: 'Take a contact out of a list (the contact stays).',
  params: z.object({ id: listIdField, cid: contactIdField }),
  output: okSchema,
  handler: (input, { core, actor }) => core.lists.removeMember(actor, input.id, input.cid),
});

export const importContacts = defineOperation({
  name: 'lists.import',
  method: 'POST',
  path: '/api/lists/:id/import',
  auth: AUTH,
  status: 202,
  idempotencyKey: true,
  summary:
    'Import a CSV (header row with an email column; name; every other column an attribute) into the list, as a durable workflow. Send JSON {csv} or the CSV itself as text/csv.',
  params: idParams,
  body: z.strictObject({
    csv: z
      .string()
      .min(1)
      .max(IMPORT_LIMITS.bytes)
      .describe(`CSV text, at most ${IMPORT_LIMITS.bytes / 1024 / 1024} MB`),
  }),
  output: importSchema,
  handler: (input, { core, actor }) => core.imports.start(actor, input.id, input.csv),
});

export const readImport = defineOperation({
  name: 'lists.importStatus',
  method: 'GET',
  path: '/api/lists/:id/imports/:importId',
  auth: AUTH,
  summary:
    'Progress of a CSV import: rows read, created, updated, rejected (with reasons); live from the workflow while it runs.',
  params: z.object({
    id: listIdField,
    importId: z
      .string()
      .regex(/^imp_[A-Za-z0-9_-]{20,}$/)
      .describe('imp_…'),
  }),
  output: importSchema,
  handler: (input, { core, actor }) => core.imports.get(actor, input.id, input.importId),
});
