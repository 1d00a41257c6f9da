import { z } from 'zod';
import { TEMPLATE_LIMITS } from '../../core/templates/service.js';
import { defineOperation, okSchema } from '../contract.js';

const MANAGE = ['session', 'oauth', 'account_key'] as const;

const template = z.object({
  id: z.string().describe("tpl_… for the account's templates, base_… for built-in ones"),
  name: z.string(),
  subject: z.string().nullable(),
  html: z.string().nullable(),
  text: z.string().nullable(),
  created_at: z.number().int().describe('ms epoch; 0 for built-in templates'),
  updated_at: z.number().int().describe('ms epoch; 0 for built-in templates'),
  base: z.boolean().describe('true for a built-in, read-only template'),
});
const templateIdParams = z.object({ id: z.string().min(1).max(100).describe('tpl_… or base_…') });

const nameField = z.string().trim().min(1).max(TEMPLATE_LIMITS.name).describe('Name shown in lists');
// Characters bound the schema; core also measures html and text in UTF-8 bytes (512 KB).
const subjectField = z
  .string()
  .max(TEMPLATE_LIMITS.subject)
  .describe('Subject line; may contain {{merge_tags}} (never HTML-escaped)');
const htmlField = z
  .string()
  .max(TEMPLATE_LIMITS.bodyBytes)
  .describe('HTML body, at most 512 KB; {{tag}} values are HTML-escaped, {{{tag}}} inserts a value unescaped');
const textField = z
  .string()
  .max(TEMPLATE_LIMITS.bodyBytes)
  .describe('Plain-text body, at most 512 KB; may contain {{merge_tags}}');

// Operations are mounted in the order of their export names (a module namespace is sorted), and a
// fixed path must come before `:id`: `listBaseTemplates` sorts before `readTemplate`, so
// GET /api/templates/base is not taken for a template id.

export const listBaseTemplates = defineOperation({
  name: 'templates.listBase',
  method: 'GET',
  path: '/api/templates/base',
  auth: MANAGE,
  summary: 'The built-in base templates to send with or start from.',
  output: z.array(template),
  handler: async (_i, { core }) => core.templates.listBase(),
});

export const listTemplates = defineOperation({
  name: 'templates.list',
  method: 'GET',
  path: '/api/templates',
  auth: MANAGE,
  mcp: { title: 'List templates' },
  summary: "The account's templates, newest first.",
  output: z.array(template),
  handler: (_i, { core, actor }) => core.templates.list(actor),
});

export const createTemplate = defineOperation({
  name: 'templates.create',
  method: 'POST',
  path: '/api/templates',
  auth: MANAGE,
  status: 201,
  idempotencyKey: true,
  summary: 'Create a template; at least one of subject, html or text is required.',
  body: z.strictObject({
    name: nameField,
    subject: subjectField.optional(),
    html: htmlField.optional(),
    text: textField.optional(),
  }),
  output: template,
  handler: (input, { core, actor }) => core.templates.create(actor, input),
});

export const readTemplate = defineOperation({
  name: 'templates.get',
  method: 'GET',
  path: '/api/templates/:id',
  auth: MANAGE,
  summary: "One of the account's templates (tpl_…) or a built-in one (base_…).",
  params: templateIdParams,
  output: template,
  handler: (input, { core, actor }) => core.templates.get(actor, input.id),
});

export const updateTemplate = defineOperation({
  name: 'templates.update',
  method: 'PATCH',
  path: '/api/templates/:id',
  auth: MANAGE,
  summary: 'Change some fields of a template; null clears subject, html or text. Built-in templates are read-only.',
  params: templateIdParams,
  body: z.strictObject({
    name: nameField.optional(),
    subject: subjectField.nullable().optional().describe('New subject; null clears it'),
    html: htmlField.nullable().optional().describe('New HTML body (at most 512 KB); null clears it'),
    text: textField.nullable().optional().describe('New plain-text body (at most 512 KB); null clears it'),
  }),
  output: template,
  handler: ({ id, ...patch }, { core, actor }) => core.templates.update(actor, id, patch),
});

export const deleteTemplate = defineOperation({
  name: 'templates.delete',
  method: 'DELETE',
  path: '/api/templates/:id',
  auth: MANAGE,
  summary: "Delete one of the account's templates. Built-in templates are read-only.",
  params: templateIdParams,
  output: okSchema,
  handler: (input, { core, actor }) => core.templates.remove(actor, input.id),
});
