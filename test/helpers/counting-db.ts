import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { drizzle } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import { openDatabase, schema, type Database, type Db } from '../../db/index.js';
import { createTestDatabase } from './pg.js';

/**
 * A fresh test database, migrated, with a second handle on it that counts (and keeps) every statement it
 * sends: what a group-commit writer's tests hold it to. `pool` lets a test open more handles or read
 * `pg_prepared_statements`; `close()` ends both handles and drops the database.
 */
export async function countingDatabase(name: string) {
  const pgdb = await createTestDatabase();
  const database: Database = await openDatabase({
    databaseUrl: pgdb.url,
    dataDir: mkdtempSync(join(tmpdir(), `svc-${name}-`)),
  });
  const pool = quietPool(pgdb.url, 10);
  const counted = { statements: 0, texts: [] as string[] };
  const db = drizzle(pool, {
    schema,
    logger: {
      logQuery: (q: string) => {
        counted.statements += 1;
        counted.texts.push(q);
      },
    },
  }) as unknown as Db;
  return {
    url: pgdb.url,
    database,
    pool,
    db,
    counted,
    /** Forgets what was counted (before each test). */
    reset() {
      counted.statements = 0;
      counted.texts = [];
    },
    async close() {
      await pool.end();
      await database.close();
      await pgdb.drop();
    },
  };
}

/**
 * A pool whose idle clients' errors are ignored: `pool.end()` resolves before its clients' sockets close, so
 * dropping the database right after terminates them, and the pool would re-emit such an error with no
 * listener, an uncaught exception in whatever test runs next.
 */
export function quietPool(url: string, max: number): pg.Pool {
  const pool = new pg.Pool({ connectionString: url, max });
  pool.on('error', () => undefined);
  return pool;
}

/** A verified domain row for a writer's test: only what the schema requires, and `extra`. */
export function domainRow(
  id: string,
  userId: string,
  domain: string,
  extra: Partial<typeof schema.domains.$inferInsert> = {},
) {
  return {
    id,
    userId,
    domain,
    status: 'verified' as const,
    provider: 'test',
    mxToken: id,
    dkimSelector: 's',
    dkimPublicKey: 'p',
    dkimPrivateKeySealed: 'k',
    createdAt: 1,
    updatedAt: 1,
    ...extra,
  };
}
