import { and, desc, eq, ilike, or, sql, type Column, type SQL } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { badRequest, conflict, notFound } from '../errors.js';
import { newId } from '../ids.js';
import { assertContactRoom, touchWithinCap } from './cap.js';
import type { Actor } from '../tenancy.js';

export type Attributes = Record<string, string | number | boolean | null>;
export type ContactInput = { email: string; name?: string | null; attributes?: Attributes; subscribed?: boolean };
type Row = typeof schema.contacts.$inferSelect;
type Tx = Pick<Db, 'insert' | 'select' | 'update' | 'execute'>;

const c = schema.contacts;

/** The wire shape of a contact (snake_case like SPEC.md's records). */
export const contactDto = (r: Row) => ({
  id: r.id,
  email: r.email,
  name: r.name,
  attributes: r.attributes,
  subscribed: r.subscribed,
  unsubscribed_at: r.unsubscribedAt,
  created_at: r.createdAt,
  updated_at: r.updatedAt,
  last_seen_at: r.lastSeenAt,
});
export type ContactDto = ReturnType<typeof contactDto>;

/** Keyset condition "older than the row `before`" on (created, id), so rows sharing a timestamp are never skipped. */
export function olderThan(
  created: Column,
  id: Column,
  anchor: { at: number; id: string } | undefined,
): SQL | undefined {
  return anchor ? sql`(${created}, ${id}) < (${anchor.at}, ${anchor.id})` : undefined;
}

/**
 * Upserts contacts by address in one statement (sorted, so concurrent batches lock rows in the same order).
 * Answers each address's id and whether it was created now; `touch` also moves `last_seen_at`. The account
 * adding an address this way (a list, an import, a send naming a sequence) subscribes a contact that never
 * subscribed (an inbound sender); one that unsubscribed stays unsubscribed.
 */
export async function upsertContacts(
  tx: Tx,
  userId: string,
  input: ContactInput[],
  opts: { touch?: boolean; overwrite?: boolean; cap?: number } = {},
) {
  const byEmail = new Map<string, ContactInput>();
  for (const x of input) byEmail.set(x.email.toLowerCase(), { ...x, email: x.email.toLowerCase() });
  if (byEmail.size === 0) return [] as { id: string; email: string; created: boolean }[];
  // With `cap` (lists, imports): 403 contacts_limit when the new addresses would pass it.
  if (opts.cap !== undefined) await assertContactRoom(tx, userId, [...byEmail.keys()], opts.cap);
  const now = Date.now();
  const rows = [...byEmail.values()]
    .sort((a, b) => (a.email < b.email ? -1 : 1))
    .map((x) => ({
      id: newId('ctc'),
      userId,
      email: x.email,
      name: x.name ?? null,
      attributes: x.attributes ?? {},
      subscribed: x.subscribed ?? true,
      unsubscribedAt: x.subscribed === false ? now : null,
      createdAt: now,
      updatedAt: now,
      lastSeenAt: opts.touch ? now : null,
    }));
  const set: Record<string, SQL> = { subscribed: subscribeIfNever };
  if (opts.touch) set.lastSeenAt = sql`excluded.last_seen_at`;
  if (opts.overwrite) {
    set.name = sql`coalesce(excluded.name, ${c.name})`;
    set.attributes = sql`${c.attributes} || excluded.attributes`;
    set.updatedAt = sql`excluded.updated_at`;
  }
  return tx
    .insert(c)
    .values(rows)
    .onConflictDoUpdate({ target: [c.userId, c.email], set })
    .returning({ id: c.id, email: c.email, created: sql<boolean>`(xmax = 0)` });
}

/**
 * A contact that never subscribed is `subscribed = false` with no `unsubscribed_at` (an inbound sender,
 * below); every unsubscribe sets `unsubscribed_at`. On an upsert, an address the account adds subscribes
 * the first kind, never the second.
 */
const subscribeIfNever = sql`case when ${c.unsubscribedAt} is null and excluded.subscribed then true else ${c.subscribed} end`;

/** Contacts of an account: CRUD, search and cursor paging, and the bulk upsert used by imports and traffic. */
export function createContactService(deps: {
  db: Db;
  touchWindowMs?: number;
  onUnsubscribed?: (userId: string, contactId: string) => void;
  cap?: number;
}) {
  const { db } = deps;
  /** CONTACTS_PER_ACCOUNT: creating past it is 403 contacts_limit; traffic past it is not recorded. */
  const cap = deps.cap ?? Number.MAX_SAFE_INTEGER;
  const touches = createTouchQueue(db, deps.touchWindowMs ?? 100, cap);

  async function load(userId: string, id: string): Promise<Row> {
    const [row] = await db
      .select()
      .from(c)
      .where(and(eq(c.userId, userId), eq(c.id, id)));
    if (!row) throw notFound('Contact not found');
    return row;
  }

  return {
    load: ({ userId }: Actor, id: string) => load(userId, id),
    /** A contact by id alone (the unsubscribe page, whose signed token names it). */
    async byId(id: string): Promise<Row | undefined> {
      return (await db.select().from(c).where(eq(c.id, id)))[0];
    },
    async list({ userId }: Actor, q: { before?: string; limit: number; search?: string }) {
      const anchor = q.before ? await load(userId, q.before).then((r) => ({ at: r.createdAt, id: r.id })) : undefined;
      const like = q.search ? `%${q.search.replace(/[%_\\]/g, '\\$&')}%` : undefined;
      const rows = await db
        .select()
        .from(c)
        .where(
          and(
            eq(c.userId, userId),
            olderThan(c.createdAt, c.id, anchor),
            like ? or(ilike(c.email, like), ilike(c.name, like)) : undefined,
          ),
        )
        .orderBy(desc(c.createdAt), desc(c.id))
        .limit(q.limit);
      return rows.map(contactDto);
    },
    async get({ userId }: Actor, id: string) {
      return contactDto(await load(userId, id));
    },
    async create({ userId }: Actor, input: ContactInput) {
      const now = Date.now();
      const [row] = await db.transaction(async (tx) => {
        await assertContactRoom(tx, userId, [input.email], cap);
        return tx
          .insert(c)
          .values({
            id: newId('ctc'),
            userId,
            email: input.email.toLowerCase(),
            name: input.name ?? null,
            attributes: input.attributes ?? {},
            subscribed: input.subscribed ?? true,
            unsubscribedAt: input.subscribed === false ? now : null,
            createdAt: now,
            updatedAt: now,
          })
          .onConflictDoNothing()
          .returning();
      });
      if (!row) throw conflict(`A contact with the address ${input.email} exists already`, 'contact_exists');
      return contactDto(row);
    },
    /** Changes name, attributes (replaced as a whole) or the subscription; `email` too, unless taken. */
    async update({ userId }: Actor, id: string, patch: Partial<ContactInput>) {
      await load(userId, id);
      const now = Date.now();
      const set: Partial<typeof c.$inferInsert> = { updatedAt: now };
      if (patch.email !== undefined) set.email = patch.email.toLowerCase();
      if (patch.name !== undefined) set.name = patch.name;
      if (patch.attributes !== undefined) set.attributes = patch.attributes;
      if (patch.subscribed !== undefined) {
        set.subscribed = patch.subscribed;
        set.unsubscribedAt = patch.subscribed ? null : now;
      }
      try {
        const [row] = await db
          .update(c)
          .set(set)
          .where(and(eq(c.userId, userId), eq(c.id, id)))
          .returning();
        if (patch.subscribed === false) deps.onUnsubscribed?.(userId, id);
        return contactDto(row!);
      } catch (err) {
        if ((err as { code?: string }).code === '23505')
          throw conflict(`A contact with the address ${patch.email} exists already`, 'contact_exists');
        throw err;
      }
    },
    async remove({ userId }: Actor, id: string) {
      await load(userId, id);
      await db.transaction(async (tx) => {
        await tx.delete(schema.listMembers).where(eq(schema.listMembers.contactId, id));
        await tx.delete(c).where(and(eq(c.userId, userId), eq(c.id, id)));
      });
      deps.onUnsubscribed?.(userId, id);
      return { ok: true as const };
    },
    /** Unsubscribes one contact from every broadcast (idempotent). */
    async unsubscribe(contactId: string) {
      const now = Date.now();
      const [row] = await db
        .update(c)
        .set({ subscribed: false, unsubscribedAt: sql`coalesce(${c.unsubscribedAt}, ${now})`, updatedAt: now })
        .where(eq(c.id, contactId))
        .returning();
      if (row) deps.onUnsubscribed?.(row.userId, row.id);
      return row ? contactDto(row) : undefined;
    },
    /**
     * Records addresses of mail traffic as contacts, last seen now; group-committed (see `createTouchQueue`).
     * Recipients of the account's sends are new contacts subscribed; senders of inbound mail
     * (`subscribed: false`) are new contacts that never subscribed, in no broadcast audience until they
     * subscribe (issue 29: any stranger's `From:` was in the next `audience: all`). An existing contact
     * keeps its subscription either way.
     */
    touch: (userId: string, emails: string[], opts: { subscribed?: boolean } = {}) =>
      touches.add(userId, emails, opts.subscribed ?? true),
    /** Writes the traffic addresses still waiting (on shutdown). */
    flushTouches: () => touches.flush(),
  };
}
export type ContactService = ReturnType<typeof createContactService>;

/** Checks the keys of contact attributes: they are addressable in filters as `attributes.<key>`. */
export function checkAttributes(a: Attributes | undefined): Attributes | undefined {
  if (!a) return a;
  const keys = Object.keys(a);
  if (keys.length > 100) throw badRequest('attributes: at most 100 keys', 'invalid_attributes');
  for (const k of keys)
    if (!/^[A-Za-z0-9_-]{1,64}$/.test(k))
      throw badRequest(`attributes: "${k}" is not a valid key (letters, digits, _ and -)`, 'invalid_attributes');
  return a;
}

const MAX_TOUCHES = 1000;

/**
 * Contacts from traffic, group-committed: every send would otherwise add an upsert of its own to the
 * accept path. Addresses gather for `windowMs` (or up to 1,000) and go out in one statement for all
 * accounts; each caller's promise settles when its addresses are written. Best effort by design: a
 * crash in the window loses only `last_seen_at` updates, never a message.
 */
function createTouchQueue(db: Db, windowMs: number, cap: number) {
  let pending = new Map<string, { userId: string; email: string; subscribed: boolean }>();
  let waiting: { resolve: () => void; reject: (err: unknown) => void }[] = [];
  let timer: NodeJS.Timeout | undefined;

  // Past the account's contact cap a new address is simply not recorded (core/contacts/cap.ts).
  const write = (batch: { userId: string; email: string; subscribed: boolean }[]) =>
    touchWithinCap(db, batch, cap, Date.now());

  function flush(): Promise<void> {
    if (timer) clearTimeout(timer);
    timer = undefined;
    const batch = [...pending.values()];
    const callers = waiting;
    pending = new Map();
    waiting = [];
    return write(batch).then(
      () => callers.forEach((w) => w.resolve()),
      (err) => {
        callers.forEach((w) => w.reject(err));
        throw err;
      },
    );
  }

  return {
    add(userId: string, emails: string[], subscribed: boolean): Promise<void> {
      for (const raw of emails) {
        const email = raw.toLowerCase();
        const key = `${userId}\n${email}`;
        // The first traffic of an address creates it, within a window as across windows (later traffic only moves last_seen_at).
        if (email.includes('@') && email.length <= 254 && !pending.has(key))
          pending.set(key, { userId, email, subscribed });
      }
      const done = new Promise<void>((resolve, reject) => waiting.push({ resolve, reject }));
      if (pending.size >= MAX_TOUCHES) flush().catch(() => undefined);
      else timer ??= setTimeout(() => void flush().catch(() => undefined), windowMs);
      return done;
    },
    flush,
  };
}
