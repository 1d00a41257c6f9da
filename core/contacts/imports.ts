import { and, asc, eq, gte, isNull, lt, sql, TransactionRollbackError } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { AppError, isAppError, notFound } from '../errors.js';
import { newId } from '../ids.js';
import type { Actor } from '../tenancy.js';
import type { ImportProgress, ImportWorkflows } from '../ports/contacts.js';
import { IMPORT_LIMITS } from '../parsing/csv-rows.js';
import { stageCsv } from './csv.js';
import { addToList, ownedList } from './lists.js';
import { upsertContacts, type ContactInput } from './service.js';

export { IMPORT_LIMITS } from '../parsing/csv-rows.js';
type Row = typeof schema.contactImports.$inferSelect;
type Chunk = { offset: number; done: boolean; progress: ImportProgress };

const ci = schema.contactImports;
const staged = schema.contactImportRows;

export const importDto = (r: Row) => ({
  id: r.id,
  list_id: r.listId,
  status: r.status,
  rows_read: r.rowsRead,
  created: r.created,
  updated: r.updated,
  rejected: r.rejected,
  rejections: r.rejections,
  created_at: r.createdAt,
  updated_at: r.updatedAt,
});
const progressOf = (r: Row): ImportProgress => ({
  status: r.status,
  rowsRead: r.rowsRead,
  created: r.created,
  updated: r.updated,
  rejected: r.rejected,
  rejections: r.rejections,
});

/**
 * CSV imports into a list: the CSV is parsed once, at upload, into staged rows (core/contacts/csv.ts);
 * a workflow then applies them in chunks, each chunk committing its contacts, its offset checkpoint and
 * the deletion of its staged rows in one transaction.
 */
export function createImportService(deps: { db: Db; workflows: ImportWorkflows; contactCap?: number }) {
  const { db } = deps;

  async function load({ userId }: Actor, listId: string, id: string): Promise<Row> {
    const [row] = await db
      .select()
      .from(ci)
      .where(and(eq(ci.userId, userId), eq(ci.listId, listId), eq(ci.id, id)));
    if (!row) throw notFound('Import not found');
    return row;
  }

  /** An import started before rows were staged at upload: stages its CSV from its checkpoint on, once. */
  async function stageLegacy(row: Row): Promise<Row> {
    return db.transaction(async (tx) => {
      const [claimed] = await tx
        .update(ci)
        .set({ rowsTotal: 0 })
        .where(and(eq(ci.id, row.id), isNull(ci.rowsTotal)))
        .returning();
      if (!claimed) return (await tx.select().from(ci).where(eq(ci.id, row.id)))[0]!;
      const total = await stageCsv(tx, row.id, claimed.csv, claimed.offset); // parsed fine at upload
      return (await tx.update(ci).set({ rowsTotal: total, csv: '' }).where(eq(ci.id, row.id)).returning())[0]!;
    });
  }

  /** Applies one chunk of staged rows and moves the checkpoint, guarded by the offset (a retried chunk applies once). */
  async function apply(row: Row, offset: number, limit: number): Promise<Row> {
    const rows = await db
      .select()
      .from(staged)
      .where(and(eq(staged.importId, row.id), gte(staged.seq, offset)))
      .orderBy(asc(staged.seq))
      .limit(limit);
    const rejections = rows.filter((r) => r.rejection).map((r) => ({ row: r.seq + 2, reason: r.rejection! }));
    const contacts: ContactInput[] = rows
      .filter((r) => !r.rejection)
      .map((r) => ({ email: r.email!, name: r.name ?? undefined, attributes: r.attributes ?? {} }));
    const next = offset + rows.length;
    const done = rows.length === 0 || next >= (row.rowsTotal ?? 0);
    return db
      .transaction(async (tx) => {
        // Past the contact cap the import stops with 403 contacts_limit (its failure reason).
        const up = await upsertContacts(tx, row.userId, contacts, { overwrite: true, cap: deps.contactCap });
        await addToList(
          tx,
          row.listId,
          up.map((u) => u.id),
        );
        const created = up.filter((u) => u.created).length;
        const [moved] = await tx
          .update(ci)
          .set({
            offset: next,
            rowsRead: sql`${ci.rowsRead} + ${rows.length}`,
            created: sql`${ci.created} + ${created}`,
            updated: sql`${ci.updated} + ${up.length - created}`,
            rejected: sql`${ci.rejected} + ${rejections.length}`,
            rejections: sql`(${ci.rejections} || ${JSON.stringify(rejections)}::jsonb)`,
            status: done ? 'done' : 'running',
            updatedAt: Date.now(),
          })
          .where(and(eq(ci.id, row.id), eq(ci.offset, offset)))
          .returning();
        if (!moved) tx.rollback();
        await tx.delete(staged).where(and(eq(staged.importId, row.id), done ? undefined : lt(staged.seq, next)));
        return moved!;
      })
      .catch(async (err) => {
        // Another attempt moved the checkpoint first: answer its state.
        if (!(err instanceof TransactionRollbackError)) throw err;
        return (await db.select().from(ci).where(eq(ci.id, row.id)))[0]!;
      });
  }

  return {
    /**
     * Into the actor's list (404 when it is not theirs): parses the CSV once (size, header, attribute columns,
     * rows), stages its rows with the import, and starts the import workflow.
     */
    async start(actor: Actor, listId: string, csv: string) {
      await ownedList(db, actor, listId);
      const { userId } = actor;
      if (Buffer.byteLength(csv, 'utf8') > IMPORT_LIMITS.bytes)
        throw new AppError(
          413,
          'payload_too_large',
          `CSV imports are limited to ${IMPORT_LIMITS.bytes / 1024 / 1024} MB`,
        );
      const id = newId('imp');
      const row = await db.transaction(async (tx) => {
        const total = await stageCsv(tx, id, csv);
        const now = Date.now();
        return (
          await tx
            .insert(ci)
            .values({
              id,
              userId,
              listId,
              status: 'running',
              csv: '',
              rowsTotal: total,
              createdAt: now,
              updatedAt: now,
            })
            .returning()
        )[0]!;
      });
      await deps.workflows.startContactImport({ importId: row.id, userId });
      return importDto(row);
    },

    /** The import, with live counts from the running workflow when it answers. */
    async get(actor: Actor, listId: string, id: string) {
      const row = await load(actor, listId, id);
      const live =
        row.status === 'running' ? await deps.workflows.contactImportProgress(id).catch(() => undefined) : undefined;
      if (!live) return importDto(row);
      return {
        ...importDto(row),
        status: live.status,
        rows_read: live.rowsRead,
        created: live.created,
        updated: live.updated,
        rejected: live.rejected,
        rejections: live.rejections,
      };
    },

    /** Workflow step: applies staged rows [offset, offset + limit) and moves the checkpoint (idempotent by the offset guard). */
    async importChunk(input: { importId: string; offset: number; limit: number }): Promise<Chunk> {
      let [row] = await db.select().from(ci).where(eq(ci.id, input.importId));
      if (!row)
        return {
          offset: input.offset,
          done: true,
          progress: { status: 'failed', rowsRead: 0, created: 0, updated: 0, rejected: 0, rejections: [] },
        };
      if (row.status !== 'running' || row.offset !== input.offset)
        return { offset: row.offset, done: row.status !== 'running', progress: progressOf(row) };
      if (row.rowsTotal === null) row = await stageLegacy(row);
      const updated = await apply(row, input.offset, input.limit).catch(async (err: unknown) => {
        // Past the contact cap the import ends `failed`, the reason recorded against the chunk's first row.
        if (!isAppError(err) || err.code !== 'contacts_limit') throw err;
        const reason = JSON.stringify([{ row: input.offset + 2, reason: err.message }]);
        await db
          .update(ci)
          .set({ status: 'failed', rejections: sql`(${ci.rejections} || ${reason}::jsonb)`, updatedAt: Date.now() })
          .where(and(eq(ci.id, input.importId), eq(ci.offset, input.offset), eq(ci.status, 'running')));
        return (await db.select().from(ci).where(eq(ci.id, input.importId)))[0]!;
      });
      const kept = updated.rejections.slice(0, IMPORT_LIMITS.rejectionsKept);
      if (updated.rejections.length > IMPORT_LIMITS.rejectionsKept)
        await db.update(ci).set({ rejections: kept }).where(eq(ci.id, row.id));
      return {
        offset: updated.offset,
        done: updated.status !== 'running',
        progress: { ...progressOf(updated), rejections: kept },
      };
    },
  };
}
export type ImportService = ReturnType<typeof createImportService>;
