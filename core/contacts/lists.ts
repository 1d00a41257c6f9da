import { and, desc, eq, inArray, sql } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { badRequest, notFound } from '../errors.js';
import { newId } from '../ids.js';
import type { Actor } from '../tenancy.js';
import { contactDto, olderThan, upsertContacts, type ContactInput } from './service.js';

type ListRow = typeof schema.lists.$inferSelect;
const l = schema.lists;
const lm = schema.listMembers;
const c = schema.contacts;

export type MembersInput = { contactIds?: string[]; emails?: string[]; contacts?: ContactInput[] };

/** The actor's list, or 404 `not_found`: the ownership check of everything done to a list (its members, its imports). */
export async function ownedList(db: Db, { userId }: Actor, id: string): Promise<ListRow> {
  const [row] = await db
    .select()
    .from(l)
    .where(and(eq(l.userId, userId), eq(l.id, id)));
  if (!row) throw notFound('List not found');
  return row;
}

/** Lists of contacts: CRUD, paged membership, and adding members by id, address or full contact (upserting). */
export function createListService(deps: { db: Db; contactCap?: number }) {
  const { db } = deps;
  const dto = (r: ListRow, count: number) => ({
    id: r.id,
    name: r.name,
    contact_count: count,
    created_at: r.createdAt,
    updated_at: r.updatedAt,
  });
  const memberCount = sql<number>`(select count(*)::int from ${lm} where ${lm.listId} = ${l.id})`;

  const load = (actor: Actor, id: string) => ownedList(db, actor, id);
  async function withCount({ userId }: Actor, id: string) {
    const [row] = await db
      .select({ list: l, count: memberCount })
      .from(l)
      .where(and(eq(l.userId, userId), eq(l.id, id)));
    if (!row) throw notFound('List not found');
    return dto(row.list, Number(row.count));
  }

  return {
    load,
    async list({ userId }: Actor) {
      const rows = await db
        .select({ list: l, count: memberCount })
        .from(l)
        .where(eq(l.userId, userId))
        .orderBy(desc(l.createdAt), desc(l.id));
      return rows.map((r) => dto(r.list, Number(r.count)));
    },
    get: withCount,
    async create({ userId }: Actor, name: string) {
      const now = Date.now();
      const [row] = await db
        .insert(l)
        .values({ id: newId('lst'), userId, name, createdAt: now, updatedAt: now })
        .returning();
      return dto(row!, 0);
    },
    async rename(actor: Actor, id: string, name: string) {
      await load(actor, id);
      await db.update(l).set({ name, updatedAt: Date.now() }).where(eq(l.id, id));
      return withCount(actor, id);
    },
    async remove(actor: Actor, id: string) {
      await load(actor, id);
      await db.transaction(async (tx) => {
        await tx.delete(lm).where(eq(lm.listId, id));
        await tx.delete(l).where(eq(l.id, id));
      });
      return { ok: true as const };
    },
    /** Members newest first; `before` is a contact id of the previous page (keyset on the time it was added). */
    async members(actor: Actor, id: string, q: { before?: string; limit: number }) {
      await load(actor, id);
      let anchor: { at: number; id: string } | undefined;
      if (q.before) {
        const [m] = await db
          .select({ at: lm.addedAt })
          .from(lm)
          .where(and(eq(lm.listId, id), eq(lm.contactId, q.before)));
        if (!m) throw badRequest('before: not a member of this list', 'invalid_cursor');
        anchor = { at: m.at, id: q.before };
      }
      const rows = await db
        .select({ contact: c })
        .from(lm)
        .innerJoin(c, eq(c.id, lm.contactId))
        .where(and(eq(lm.listId, id), olderThan(lm.addedAt, lm.contactId, anchor)))
        .orderBy(desc(lm.addedAt), desc(lm.contactId))
        .limit(q.limit);
      return rows.map((r) => contactDto(r.contact));
    },
    /** Adds contacts (ids of the account's contacts, or addresses/contacts upserted first); answers how many joined now. */
    async addMembers(actor: Actor, id: string, input: MembersInput) {
      const { userId } = actor;
      await load(actor, id);
      const upserts: ContactInput[] = [...(input.emails ?? []).map((email) => ({ email })), ...(input.contacts ?? [])];
      return db.transaction(async (tx) => {
        const ids = new Set(input.contactIds ?? []);
        if (ids.size) {
          const owned = await tx
            .select({ id: c.id })
            .from(c)
            .where(and(eq(c.userId, userId), inArray(c.id, [...ids])));
          if (owned.length !== ids.size)
            throw notFound('Some contactIds are not contacts of this account', 'contact_not_found');
        }
        const upserted = await upsertContacts(tx, userId, upserts, { overwrite: true, cap: deps.contactCap });
        for (const u of upserted) ids.add(u.id);
        const added = await addToList(tx, id, [...ids]);
        return { added, created: upserted.filter((u) => u.created).length };
      });
    },
    async removeMember(actor: Actor, id: string, contactId: string) {
      await load(actor, id);
      const gone = await db
        .delete(lm)
        .where(and(eq(lm.listId, id), eq(lm.contactId, contactId)))
        .returning({ id: lm.contactId });
      if (gone.length === 0) throw notFound('Contact is not in this list');
      return { ok: true as const };
    },
  };
}
export type ListService = ReturnType<typeof createListService>;

/** Inserts memberships in one statement; answers how many are new. */
export async function addToList(tx: Pick<Db, 'insert'>, listId: string, contactIds: string[]): Promise<number> {
  if (contactIds.length === 0) return 0;
  const now = Date.now();
  const rows = await tx
    .insert(lm)
    .values(contactIds.map((contactId) => ({ listId, contactId, addedAt: now })))
    .onConflictDoNothing()
    .returning({ id: lm.contactId });
  return rows.length;
}
