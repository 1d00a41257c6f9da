import { and, eq, inArray, sql } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { AppError } from '../errors.js';
import { newId } from '../ids.js';

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
 * Records traffic addresses (the touch queue's batch) within the cap, in one statement for every account in
 * it: an address that is a contact already always passes (its `last_seen_at` moves); new ones pass while the
 * account has room, in address order, and the rest are simply not recorded (mail is never failed for a
 * contact). The account's count is read only for accounts with a new address. Rows are written sorted, so
 * concurrent writers lock them in the same order.
 */
export async function touchWithinCap(
  db: Db,
  batch: { userId: string; email: string; subscribed: boolean }[],
  cap: number,
  now: number,
): Promise<void> {
  if (batch.length === 0) return;
  const col = <T>(f: (x: (typeof batch)[number]) => T) => sql.param(batch.map(f));
  await db.execute(sql`with input as (
      select * from unnest(${col(() => newId('ctc'))}::text[], ${col((x) => x.userId)}::text[],
        ${col((x) => x.email)}::text[], ${col((x) => x.subscribed)}::bool[]) as i(id, user_id, email, subscribed)),
    fresh as (
      select i.*, row_number() over (partition by i.user_id order by i.email) as n from input i
      where not exists (select 1 from ${c} k where k.user_id = i.user_id and k.email = i.email)),
    room as (
      select u.user_id, ${cap} - (select count(*) from ${c} k where k.user_id = u.user_id) as room
      from (select distinct user_id from fresh) u),
    kept as (
      select i.id, i.user_id, i.email, i.subscribed from input i
      where not exists (select 1 from fresh f where f.user_id = i.user_id and f.email = i.email)
      union all
      select f.id, f.user_id, f.email, f.subscribed from fresh f join room r on r.user_id = f.user_id where f.n <= r.room)
    insert into ${c} (id, user_id, email, attributes, subscribed, created_at, updated_at, last_seen_at)
    select id, user_id, email, '{}'::jsonb, subscribed, ${now}::bigint, ${now}::bigint, ${now}::bigint
    from kept order by user_id, email
    on conflict (user_id, email) do update set last_seen_at = excluded.last_seen_at`);
}
