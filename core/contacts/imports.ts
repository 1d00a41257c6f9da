import { parse } from 'csv-parse/sync';
import { and, eq, sql, TransactionRollbackError } from 'drizzle-orm';
import { z } from 'zod';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { AppError, badRequest, notFound } from '../errors.js';
import { newId } from '../ids.js';
import type { WorkflowPort } from '../index.js';
import { addToList } from './lists.js';
import { upsertContacts, type ContactInput } from './service.js';

type Row = typeof schema.contactImports.$inferSelect;
export const IMPORT_LIMITS = { bytes: 5 * 1024 * 1024, rows: 100_000, rejectionsKept: 100 };
/** What the import workflow answers to `importProgressQuery`, and the shape of GET …/imports/:id. */
export type ImportProgress = { status: Row['status']; rowsRead: number; created: number; updated: number; rejected: number; rejections: { row: number; reason: string }[] };

const ci = schema.contactImports;
const emailCheck = z.email();
const EMAIL_COLUMNS = ['email', 'e-mail', 'email address', 'email_address'];

export const importDto = (r: Row) => ({
  id: r.id, list_id: r.listId, status: r.status, rows_read: r.rowsRead, created: r.created, updated: r.updated, rejected: r.rejected,
  rejections: r.rejections, created_at: r.createdAt, updated_at: r.updatedAt,
});

/** Parses the whole CSV into records keyed by the lower-cased header; errors are the caller's (400). */
function records(csv: string): Record<string, string>[] {
  return parse(csv, {
    columns: (header: string[]) => header.map((h) => h.trim().toLowerCase()), skip_empty_lines: true, trim: true, bom: true,
    relax_column_count: true, max_record_size: 64 * 1024,
  }) as Record<string, string>[];
}

/** A CSV row as a contact: the email column, `name` (or first/last name), every other column an attribute. */
function toContact(rec: Record<string, string>): ContactInput | string {
  const emailKey = EMAIL_COLUMNS.find((k) => k in rec);
  const email = emailKey ? rec[emailKey]!.toLowerCase() : '';
  if (!email) return 'missing email';
  if (email.length > 254 || !emailCheck.safeParse(email).success) return `invalid email "${email.slice(0, 100)}"`;
  const name = rec.name || [rec.first_name ?? rec['first name'], rec.last_name ?? rec['last name']].filter(Boolean).join(' ') || undefined;
  const attributes: Record<string, string> = {};
  for (const [k, v] of Object.entries(rec)) {
    if (k === emailKey || k === 'name' || v === '' || v === undefined) continue;
    const key = k.replace(/[^a-z0-9_-]+/g, '_').slice(0, 64);
    if (key) attributes[key] = v;
  }
  return { email, name, attributes };
}

/** CSV imports into a list, run by a workflow in chunks; each chunk commits with its offset checkpoint. */
export function createImportService(deps: { db: Db; workflows: WorkflowPort }) {
  const { db } = deps;

  async function load(userId: string, listId: string, id: string): Promise<Row> {
    const [row] = await db.select().from(ci).where(and(eq(ci.userId, userId), eq(ci.listId, listId), eq(ci.id, id)));
    if (!row) throw notFound('Import not found');
    return row;
  }

  return {
    /** Checks the CSV (size, header, parses), stores it and starts the import workflow. */
    async start(userId: string, listId: string, csv: string) {
      if (Buffer.byteLength(csv, 'utf8') > IMPORT_LIMITS.bytes) throw new AppError(413, 'payload_too_large', `CSV imports are limited to ${IMPORT_LIMITS.bytes / 1024 / 1024} MB`);
      let recs: Record<string, string>[];
      try {
        recs = records(csv);
      } catch (err) {
        throw badRequest(`csv: ${(err as Error).message}`, 'invalid_csv');
      }
      if (recs.length > IMPORT_LIMITS.rows) throw badRequest(`csv: at most ${IMPORT_LIMITS.rows} rows`, 'invalid_csv');
      if (recs.length && !EMAIL_COLUMNS.some((k) => k in recs[0]!)) throw badRequest('csv: the header needs an "email" column', 'invalid_csv');
      const now = Date.now();
      const [row] = await db.insert(ci).values({ id: newId('imp'), userId, listId, status: 'running', csv, createdAt: now, updatedAt: now }).returning();
      await deps.workflows.startContactImport({ importId: row!.id, userId });
      return importDto(row!);
    },

    /** The import, with live counts from the running workflow when it answers. */
    async get(userId: string, listId: string, id: string) {
      const row = await load(userId, listId, id);
      const live = row.status === 'running' ? await deps.workflows.contactImportProgress(id).catch(() => undefined) : undefined;
      if (!live) return importDto(row);
      return { ...importDto(row), status: live.status, rows_read: live.rowsRead, created: live.created, updated: live.updated, rejected: live.rejected, rejections: live.rejections };
    },

    /**
     * Workflow step: imports rows [offset, offset + limit) and moves the checkpoint in the same transaction,
     * guarded by the offset, so a retried or replayed chunk is applied once.
     */
    async importChunk(input: { importId: string; offset: number; limit: number }): Promise<{ offset: number; done: boolean; progress: ImportProgress }> {
      const [row] = await db.select().from(ci).where(eq(ci.id, input.importId));
      if (!row) return { offset: input.offset, done: true, progress: { status: 'failed', rowsRead: 0, created: 0, updated: 0, rejected: 0, rejections: [] } };
      const progressOf = (r: Row): ImportProgress => ({ status: r.status, rowsRead: r.rowsRead, created: r.created, updated: r.updated, rejected: r.rejected, rejections: r.rejections });
      if (row.status !== 'running' || row.offset !== input.offset) return { offset: row.offset, done: row.status !== 'running', progress: progressOf(row) };
      const all = records(row.csv);
      const slice = all.slice(input.offset, input.offset + input.limit);
      const rejections: { row: number; reason: string }[] = [];
      const contacts: ContactInput[] = [];
      slice.forEach((rec, i) => {
        const c = toContact(rec);
        if (typeof c === 'string') rejections.push({ row: input.offset + i + 2, reason: c });
        else contacts.push(c);
      });
      const next = input.offset + slice.length;
      const done = next >= all.length;
      const updated = await db.transaction(async (tx) => {
        const up = await upsertContacts(tx, row.userId, contacts, { overwrite: true });
        await addToList(tx, row.listId, up.map((u) => u.id));
        const created = up.filter((u) => u.created).length;
        const [moved] = await tx.update(ci).set({
          offset: next, rowsRead: sql`${ci.rowsRead} + ${slice.length}`, created: sql`${ci.created} + ${created}`,
          updated: sql`${ci.updated} + ${up.length - created}`, rejected: sql`${ci.rejected} + ${rejections.length}`,
          rejections: sql`(${ci.rejections} || ${JSON.stringify(rejections)}::jsonb)`, status: done ? 'done' : 'running', updatedAt: Date.now(),
        }).where(and(eq(ci.id, row.id), eq(ci.offset, input.offset))).returning();
        if (!moved) tx.rollback();
        return moved!;
      }).catch(async (err) => {
        // Another attempt moved the checkpoint first: answer its state.
        if (!(err instanceof TransactionRollbackError)) throw err;
        return (await db.select().from(ci).where(eq(ci.id, input.importId)))[0]!;
      });
      const kept = updated.rejections.slice(0, IMPORT_LIMITS.rejectionsKept);
      if (updated.rejections.length > IMPORT_LIMITS.rejectionsKept) await db.update(ci).set({ rejections: kept }).where(eq(ci.id, row.id));
      return { offset: updated.offset, done: updated.status !== 'running', progress: { ...progressOf(updated), rejections: kept } };
    },
  };
}
export type ImportService = ReturnType<typeof createImportService>;
