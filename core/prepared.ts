import { createHash } from 'node:crypto';
import { is, Placeholder, SQL, type Column, type Query } from 'drizzle-orm';
import { PgDialect, type PgPreparedQuery, type PreparedQueryConfig } from 'drizzle-orm/pg-core';
import type { Db } from '../db/index.js';

/**
 * Named statements: a statement whose text never changes is prepared by name (node-pg: parsed and planned
 * once per connection), run through drizzle's session of the handle given (a transaction's too), so its
 * logger counts it as any other. Values bound as drizzle binds them.
 */

/** A value as drizzle binds it for `column` (null stays null; jsonb is JSON-encoded, by the column). */
export function toDriver(column: Column, value: unknown): unknown {
  if (value === null) return null;
  if (is(value, SQL) || is(value, Placeholder)) throw new Error(`${column.name}: an SQL value cannot be bound`);
  const mapped = column.mapToDriverValue(value);
  if (is(mapped, SQL)) throw new Error(`${column.name}: a value mapped to SQL cannot be bound`);
  return mapped;
}

const dialect = new PgDialect();
/** A statement's text and its name: the same text always gets the same name (a hash of it). */
export type Named = { name: string; query: Query };
export function named(prefix: string, statement: SQL): Named {
  const query = dialect.sqlToQuery(statement);
  return { name: `${prefix}_${createHash('sha1').update(query.sql).digest('hex').slice(0, 16)}`, query };
}

const prepared = new WeakMap<Db, Map<string, PgPreparedQuery<PreparedQueryConfig>>>();
/**
 * Runs a named statement through drizzle's own prepared query of `db` (node-pg: a named prepared statement,
 * parsed and planned once per connection; PGlite: the same text, unnamed), so its logger counts it as any other.
 */
export async function runNamed(
  db: Db,
  statement: Named,
  values: Record<string, unknown>,
): Promise<{ rows: Record<string, unknown>[] }> {
  let byName = prepared.get(db);
  if (!byName) prepared.set(db, (byName = new Map()));
  let p = byName.get(statement.name);
  if (!p)
    byName.set(statement.name, (p = db._.session.prepareQuery(statement.query, undefined, statement.name, false)));
  return (await p.execute(values)) as { rows: Record<string, unknown>[] };
}

/**
 * A row as a named statement returns it (by column name, in driver values), as drizzle gives it for these
 * `columns` (by key, each mapped by its column: numbers for the ms columns, parsed jsonb, …).
 */
export function rowOf<T>(columns: Record<string, Column>, raw: Record<string, unknown>): T {
  const out: Record<string, unknown> = {};
  for (const [key, column] of Object.entries(columns)) {
    const v = raw[column.name];
    out[key] = v === null || v === undefined ? null : column.mapFromDriverValue(v);
  }
  return out as T;
}

/** Named statements built once per key (each variant of a statement's text), the same `Named` on every call after. */
export function namedCache(): (key: string, build: () => Named) => Named {
  const built = new Map<string, Named>();
  return (key, build) => {
    let statement = built.get(key);
    if (!statement) built.set(key, (statement = build()));
    return statement;
  };
}
