import { and, eq, inArray, sql } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { AppError } from '../errors.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Q = Db | Parameters<Parameters<Db['transaction']>[0]>[0] | any;
const c = schema.contacts;

/** 403 contacts_limit: the account holds CONTACTS_PER_ACCOUNT contacts; deleting some makes room. */
export const contactsLimit = (cap: number) =>
  new AppError(403, 'contacts_limit', `This account has reached its cap of ${cap} contacts; delete contacts first`);

/** Locks the account's contact count until `tx` ends, so concurrent writers cannot pass the cap together. */
export const lockContacts = (tx: Q, userId: string) =>
  tx.execute(sql`select pg_advisory_xact_lock(hashtext(${`contacts:${userId}`}))`);

async function countOf(q: Q, userId: string): Promise<number> {
  const [row] = await q
    .select({ n: sql<string>`count(*)` })
    .from(c)
    .where(eq(c.userId, userId));
  return Number(row?.n ?? 0);
}

/** The addresses among `emails` that are not contacts of the account yet. */
async function newAddresses(q: Q, userId: string, emails: string[]): Promise<string[]> {
  const lower = [...new Set(emails.map((e) => e.toLowerCase()))];
  if (lower.length === 0) return [];
  const known = new Set(
    (
      await q
        .select({ email: c.email })
        .from(c)
        .where(and(eq(c.userId, userId), inArray(c.email, lower)))
    ).map((r: { email: string }) => r.email),
  );
  return lower.filter((e) => !known.has(e));
}

/** Inside `tx`: throws 403 contacts_limit when the addresses not yet contacts would take the account past `cap`. */
export async function assertContactRoom(tx: Q, userId: string, emails: string[], cap: number): Promise<void> {
  await lockContacts(tx, userId);
  const fresh = await newAddresses(tx, userId, emails);
  if (fresh.length > 0 && (await countOf(tx, userId)) + fresh.length > cap) throw contactsLimit(cap);
}

/**
 * Traffic addresses (the touch queue's batch) within the cap: an address that is a contact already
 * always passes (its `last_seen_at` moves); new ones pass while the account has room, the rest are
 * simply not recorded (mail is never failed for a contact).
 */
export async function withinContactCap<T extends { userId: string; email: string }>(
  db: Db,
  batch: T[],
  cap: number,
): Promise<T[]> {
  const byUser = new Map<string, T[]>();
  for (const x of batch) byUser.set(x.userId, [...(byUser.get(x.userId) ?? []), x]);
  const kept: T[] = [];
  for (const [userId, rows] of byUser) {
    const fresh = new Set(
      await newAddresses(
        db,
        userId,
        rows.map((r) => r.email),
      ),
    );
    let room = fresh.size > 0 ? cap - (await countOf(db, userId)) : 0;
    for (const r of rows) {
      if (!fresh.has(r.email)) kept.push(r);
      else if (room-- > 0) kept.push(r);
    }
  }
  return kept;
}
