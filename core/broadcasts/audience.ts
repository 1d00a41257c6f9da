import { and, eq, sql, type SQL } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { badRequest, notFound } from '../errors.js';
import { compileFilter, parseFilter } from './filter.js';

export type Audience = { type: 'all' | 'list' | 'filter'; id?: string; query?: string };
const c = schema.contacts;

/** Checks an audience against the account (the list exists, the filter parses); answers it normalized. */
export async function checkAudience(db: Db, userId: string, a: Audience): Promise<Audience> {
  if (a.type === 'list') {
    if (!a.id) throw badRequest('audience.id: a list id (lst_…) is required for type "list"', 'invalid_audience');
    const [row] = await db
      .select({ id: schema.lists.id })
      .from(schema.lists)
      .where(and(eq(schema.lists.userId, userId), eq(schema.lists.id, a.id)));
    if (!row) throw notFound(`List ${a.id} not found`, 'list_not_found');
    return { type: 'list', id: a.id };
  }
  if (a.type === 'filter') {
    if (!a.query?.trim())
      throw badRequest('audience.query: a filter query is required for type "filter"', 'invalid_audience');
    parseFilter(a.query);
    return { type: 'filter', query: a.query };
  }
  return { type: 'all' };
}

/** The SQL condition over `contacts` selecting an audience's subscribed contacts. */
export function audienceCondition(userId: string, a: Audience): SQL {
  const base = and(eq(c.userId, userId), eq(c.subscribed, true))!;
  if (a.type === 'list') {
    const lm = schema.listMembers;
    return and(
      base,
      sql`exists (select 1 from ${lm} where ${lm.listId} = ${a.id ?? ''} and ${lm.contactId} = ${c.id})`,
    )!;
  }
  if (a.type === 'filter') return and(base, compileFilter(parseFilter(a.query ?? '')))!;
  return base;
}

/** How many contacts the audience selects right now. */
export async function countAudience(db: Db, userId: string, a: Audience): Promise<number> {
  const [row] = await db
    .select({ n: sql<number>`count(*)::int` })
    .from(c)
    .where(audienceCondition(userId, a));
  return Number(row?.n ?? 0);
}

/** Copies the audience into the broadcast's ledger in the database (insert … select), once; answers its size. */
export async function snapshotAudience(
  tx: Pick<Db, 'execute' | 'select'>,
  broadcastId: string,
  userId: string,
  a: Audience,
): Promise<number> {
  const r = schema.broadcastRecipients;
  await tx.execute(sql`insert into ${r} (broadcast_id, seq, contact_id, email)
    select ${broadcastId}, row_number() over (order by ${c.createdAt}, ${c.id}), ${c.id}, ${c.email} from ${c}
    where ${audienceCondition(userId, a)} and not exists (select 1 from ${r} where ${r.broadcastId} = ${broadcastId})
    on conflict do nothing`);
  const [row] = await tx
    .select({ n: sql<number>`count(*)::int` })
    .from(r)
    .where(eq(r.broadcastId, broadcastId));
  return Number(row?.n ?? 0);
}
