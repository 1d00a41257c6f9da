import { and, asc, inArray, sql, type SQL } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Tx = Db | Parameters<Parameters<Db['transaction']>[0]>[0] | any;
const mm = schema.mailboxMessages;
const bodies = schema.mailboxBodies;

/**
 * Deletes mailbox rows inside `tx`, and each body whose last row this was. The bodies are locked first
 * (in id order): two transactions deleting the last two rows of one body then run their check one after
 * the other, and the second sees the first's delete, so a body is never left behind by a race.
 */
export async function deleteMailboxMessages(tx: Tx, where: SQL | undefined): Promise<{ uid: number }[]> {
  const gone: { uid: number; bodyId: string }[] = await tx
    .delete(mm)
    .where(where)
    .returning({ uid: mm.uid, bodyId: mm.bodyId });
  const ids = [...new Set(gone.map((g) => g.bodyId))].sort();
  if (ids.length > 0) {
    await tx
      .select({ id: bodies.id })
      .from(bodies)
      .where(inArray(bodies.id, ids))
      .orderBy(asc(bodies.id))
      .for('update');
    await tx
      .delete(bodies)
      .where(and(inArray(bodies.id, ids), sql`not exists (select 1 from ${mm} where ${mm.bodyId} = ${bodies.id})`));
  }
  return gone;
}
