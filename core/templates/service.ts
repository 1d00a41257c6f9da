import { and, desc, eq } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { badRequest, forbidden, notFound } from '../errors.js';
import { newId } from '../ids.js';
import { BASE_TEMPLATES, findBaseTemplate, type BaseTemplate } from './base.js';
import type { Actor } from '../tenancy.js';

/** Limits of a user template; the API schema states the same ones so they show in the JSON Schema. */
export const TEMPLATE_LIMITS = { name: 100, subject: 998, bodyBytes: 512 * 1024 } as const;

/** A template as the API answers it: user templates (`tpl_`) and built-in ones (`base_`, timestamps 0). */
export type Template = {
  id: string;
  name: string;
  subject: string | null;
  html: string | null;
  text: string | null;
  created_at: number;
  updated_at: number;
  base: boolean;
};
/** The content a send starts from; explicit request fields override it. */
export type TemplateContent = { subject: string | null; html: string | null; text: string | null };
export type CreateTemplateInput = { name: string; subject?: string; html?: string; text?: string };
/** `null` clears a field; an absent field is left as it is. */
export type UpdateTemplatePatch = {
  name?: string;
  subject?: string | null;
  html?: string | null;
  text?: string | null;
};

type TemplateRow = typeof schema.templates.$inferSelect;

const notFoundError = () => notFound('Template not found', 'template_not_found');
const readonlyError = () =>
  forbidden('Base templates are read-only; create a template from one instead', 'base_template_readonly');

const baseDto = (b: BaseTemplate): Template => ({
  id: b.id,
  name: b.name,
  subject: b.subject,
  html: b.html,
  text: b.text,
  created_at: 0,
  updated_at: 0,
  base: true,
});
const rowDto = (r: TemplateRow): Template => ({
  id: r.id,
  name: r.name,
  subject: r.subject,
  html: r.html,
  text: r.text,
  created_at: r.createdAt,
  updated_at: r.updatedAt,
  base: false,
});

/** User templates (`tpl_`, one account's rows in `templates`) plus the read-only built-in ones (`base_`). */
export function createTemplateService(deps: { db: Db }) {
  const { db } = deps;
  const t = schema.templates;

  const load = async (userId: string, id: string): Promise<TemplateRow> => {
    // Another account's id answers exactly like an unknown one: ids must not be probeable.
    const [row] = await db
      .select()
      .from(t)
      .where(and(eq(t.id, id), eq(t.userId, userId)))
      .limit(1);
    if (!row) throw notFoundError();
    return row;
  };
  const refuseBase = (id: string) => {
    if (findBaseTemplate(id)) throw readonlyError();
  };
  const get = async (userId: string, id: string): Promise<Template> => {
    const base = findBaseTemplate(id);
    if (base) return baseDto(base);
    return rowDto(await load(userId, id));
  };

  return {
    /** The account's templates, newest first. */
    async list({ userId }: Actor): Promise<Template[]> {
      const rows = await db.select().from(t).where(eq(t.userId, userId)).orderBy(desc(t.createdAt), desc(t.id));
      return rows.map(rowDto);
    },
    /** The built-in templates, the same for every account. */
    listBase(): Template[] {
      return BASE_TEMPLATES.map(baseDto);
    },
    /** One of the account's templates or a built-in one. */
    get: ({ userId }: Actor, id: string) => get(userId, id),
    /** Stores a new `tpl_` template for the account. */
    async create({ userId }: Actor, input: CreateTemplateInput): Promise<Template> {
      checkName(input.name);
      const content = { subject: input.subject ?? null, html: input.html ?? null, text: input.text ?? null };
      checkContent(content);
      const now = Date.now();
      const [row] = await db
        .insert(t)
        .values({ id: newId('tpl'), userId, name: input.name, ...content, createdAt: now, updatedAt: now })
        .returning();
      return rowDto(row!);
    },
    /** Applies a partial change; built-in templates are read-only (403), other ids 404. */
    async update({ userId }: Actor, id: string, patch: UpdateTemplatePatch): Promise<Template> {
      refuseBase(id);
      const current = await load(userId, id);
      const changes = definedOnly(patch);
      if (Object.keys(changes).length === 0) return rowDto(current);
      if (changes.name !== undefined) checkName(changes.name);
      checkContent({ subject: current.subject, html: current.html, text: current.text, ...changes });
      const [row] = await db
        .update(t)
        .set({ ...changes, updatedAt: Date.now() })
        .where(and(eq(t.id, id), eq(t.userId, userId)))
        .returning();
      // Deleted between the read and the write: the same answer as if it had never existed.
      if (!row) throw notFoundError();
      return rowDto(row);
    },
    /** Deletes one of the account's templates; built-in templates are read-only (403). */
    async remove({ userId }: Actor, id: string): Promise<{ ok: true }> {
      refuseBase(id);
      const gone = await db
        .delete(t)
        .where(and(eq(t.id, id), eq(t.userId, userId)))
        .returning({ id: t.id });
      if (gone.length === 0) throw notFoundError();
      return { ok: true };
    },
    /** The subject/html/text a send with `templateId` starts from: the account's `tpl_` or any `base_`. */
    async resolve(userId: string, templateId: string): Promise<TemplateContent> {
      const { subject, html, text } = await get(userId, templateId);
      return { subject, html, text };
    },
  };
}
export type TemplateService = ReturnType<typeof createTemplateService>;

function definedOnly(patch: UpdateTemplatePatch): UpdateTemplatePatch {
  return Object.fromEntries(Object.entries(patch).filter(([, v]) => v !== undefined)) as UpdateTemplatePatch;
}

function checkName(name: string): void {
  if (name.length < 1 || name.length > TEMPLATE_LIMITS.name)
    throw badRequest(`name: must be 1 to ${TEMPLATE_LIMITS.name} characters`, 'validation_error');
}

/** Core enforces the limits too, for callers that do not come through the API schema; bodies are measured in UTF-8 bytes. */
function checkContent(c: TemplateContent): void {
  if (!c.subject && !c.html && !c.text)
    throw badRequest('A template needs at least one of subject, html or text', 'validation_error');
  if (c.subject && c.subject.length > TEMPLATE_LIMITS.subject)
    throw badRequest(`subject: at most ${TEMPLATE_LIMITS.subject} characters`, 'validation_error');
  for (const field of ['html', 'text'] as const) {
    const value = c[field];
    if (value && Buffer.byteLength(value, 'utf8') > TEMPLATE_LIMITS.bodyBytes) {
      throw badRequest(`${field}: at most ${TEMPLATE_LIMITS.bodyBytes / 1024} KB`, 'validation_error');
    }
  }
}
