import { getTableColumns, getTableName, is, SQL, sql, type Column } from 'drizzle-orm';
import type { PgTable } from 'drizzle-orm/pg-core';
import { toDriver } from './prepared.js';

/**
 * Statements whose text depends on their shape only, not on how many rows they carry: each column's values go
 * in as one array parameter (`insert into t (cols) select * from unnest($1::text[], $2::jsonb[], …)`), so the
 * text can be a named prepared statement that PostgreSQL parses and plans once per connection, and nothing is
 * built per call but the arrays.
 */

/** One column of an array insert: its values' SQL type, and what a row that leaves it undefined gets. */
type ArrayColumn = {
  key: string;
  column: Column;
  /** The SQL type of one value (the parameter is an array of it). */
  type: string;
  /**
   * Left out of the statement when every row of a group leaves it undefined (then it gets its DEFAULT, as
   * drizzle's `default` would give it): a column with a default and no function to compute a value.
   */
  optional: boolean;
  /** The value of a row that leaves it undefined while other rows of its group set it. */
  missing: () => unknown;
};

/**
 * What drizzle's multi-row insert writes for a row that leaves `column` undefined, as a value: the result of
 * its default function (drizzle calls it per row too); else nothing bound, `default`, which for a column
 * with no DEFAULT is NULL and for one with a constant default is that constant (the migrations are generated
 * from these declarations). An SQL default (or a sequence) cannot be known here: a group that sets such a
 * column in some rows and not in others is refused (its sends are then written one by one, each consistent).
 */
function missingValue(table: string, column: Column): () => unknown {
  const fn = column.defaultFn ?? (!column.default && column.onUpdateFn ? column.onUpdateFn : undefined);
  if (fn) return () => toDriver(column, fn());
  if (!column.hasDefault) return () => null;
  const d = column.default;
  if (d === undefined || is(d, SQL))
    return () => {
      throw new Error(`${table}.${column.name}: set in some rows of a group and not in others, and its default is SQL`);
    };
  const value = toDriver(column, d);
  return () => value;
}

/**
 * Inserts rows of `table` from one array per column. Every column of the table definition goes in (a column
 * added later is written too), except generated ones, as drizzle leaves them out. A column left undefined in
 * every row of a group is left out of that group's statement, so PostgreSQL gives it its DEFAULT exactly as
 * drizzle's `default` does. That makes a few variants of the text, at most one per subset of the columns with
 * a default (messages has four: attempts, track_opens, track_clicks, enrols), each prepared once when first used.
 */
export function arrayInsert(table: PgTable) {
  const name = getTableName(table);
  const columns: ArrayColumn[] = Object.entries(getTableColumns(table))
    .filter(([, c]) => c.generated === undefined || c.generated.type === 'byDefault')
    .map(([key, column]) => {
      const type = column.getSQLType();
      // unnest() flattens an array of arrays: such a column would need a statement of its own shape.
      if (type.endsWith(']')) throw new Error(`${name}.${column.name}: an array column cannot be inserted from arrays`);
      const computed = column.defaultFn !== undefined || (!column.default && column.onUpdateFn !== undefined);
      return { key, column, type, optional: column.hasDefault && !computed, missing: missingValue(name, column) };
    });
  const optional = columns.filter((c) => c.optional);

  /** The columns a group writes: all but the optional ones it leaves undefined in every row. */
  function columnsOf(rows: Record<string, unknown>[]): { variant: string; columns: ArrayColumn[] } {
    if (optional.length === 0) return { variant: '', columns };
    const skip = new Set(optional.filter((c) => rows.every((r) => r[c.key] === undefined)));
    return {
      variant: optional.map((c) => (skip.has(c) ? '0' : '1')).join(''),
      columns: skip.size === 0 ? columns : columns.filter((c) => !skip.has(c)),
    };
  }

  return {
    columnsOf,
    /** `insert into t (cols) select * from unnest(…)`, one placeholder per column (`${prefix}${i}`). */
    statement(cols: ArrayColumn[], prefix: string): SQL {
      const names = sql.join(
        cols.map((c) => sql.identifier(c.column.name)),
        sql`, `,
      );
      const arrays = sql.join(
        cols.map((c, i) => sql`${sql.placeholder(`${prefix}${i}`)}::${sql.raw(c.type)}[]`),
        sql`, `,
      );
      return sql`insert into ${table} (${names}) select * from unnest(${arrays})`;
    },
    /** The placeholder values of `statement(cols, prefix)` for these rows. */
    values(cols: ArrayColumn[], rows: Record<string, unknown>[], prefix: string): Record<string, unknown[]> {
      const out: Record<string, unknown[]> = {};
      cols.forEach((c, i) => {
        out[`${prefix}${i}`] = rows.map((r) => {
          const v = r[c.key];
          return v === undefined ? c.missing() : toDriver(c.column, v);
        });
      });
      return out;
    },
  };
}
