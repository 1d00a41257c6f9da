import { sql } from 'drizzle-orm';
import type { Db } from '../../db/index.js';

const rowsOf = <T>(res: unknown): T[] => (res as { rows?: T[] }).rows ?? (res as T[]);

/**
 * A plain `count(*)` of every table of the service's schema, by name. The tables come from `pg_class`
 * (every ordinary table, whatever its columns), not from a list of the ones that name an account: an
 * oracle that does not share the removal's idea of what belongs to an account.
 */
export async function tableCounts(db: Db): Promise<Record<string, number>> {
  const tables = rowsOf<{ name: string }>(
    await db.execute(sql`select c.relname as name from pg_class c
    join pg_namespace n on n.oid = c.relnamespace
    where n.nspname = current_schema() and c.relkind in ('r', 'p') order by c.relname`),
  );
  const counts: Record<string, number> = {};
  for (const { name } of tables) {
    const [row] = rowsOf<{ n: number }>(await db.execute(sql`select count(*)::int as n from ${sql.identifier(name)}`));
    counts[name] = row!.n;
  }
  return counts;
}

/** The tables whose count differs between two snapshots, with both counts. */
export function changedTables(
  before: Record<string, number>,
  after: Record<string, number>,
): Record<string, [number, number]> {
  const changed: Record<string, [number, number]> = {};
  for (const name of new Set([...Object.keys(before), ...Object.keys(after)])) {
    if ((before[name] ?? 0) !== (after[name] ?? 0)) changed[name] = [before[name] ?? 0, after[name] ?? 0];
  }
  return changed;
}
