import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { PgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core';
import * as schema from './schema/index.js';

export { schema };
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Db = PgDatabase<PgQueryResultHKT, typeof schema, any>;
export type Database = {
  db: Db;
  kind: 'postgres' | 'pglite';
  ping(): Promise<void>;
  /** Runs `fn` holding a PostgreSQL session advisory lock (a no-op wrapper on single-process PGlite). */
  withLock<T>(lockId: number, fn: () => Promise<T>): Promise<T>;
  close(): Promise<void>;
};

const MIGRATIONS = join(dirname(fileURLToPath(import.meta.url)), 'migrations');
/** Serializes migrations when API, SMTP and worker start together against one PostgreSQL. */
const MIGRATION_LOCK = 7_301_501;

/** Opens PostgreSQL at `databaseUrl`, or embedded PGlite under `dataDir/pglite`, and applies migrations. */
/** Where the pool reports an idle client's error (the service passes its logger; db/ imports nothing from core/). */
export type PoolErrorLog = { error(fields: Record<string, unknown>, message: string): void };

export async function openDatabase(opts: {
  databaseUrl?: string;
  dataDir: string;
  log?: PoolErrorLog;
  queryStatsFile?: string;
}): Promise<Database> {
  const database = opts.databaseUrl
    ? await openPostgres(opts.databaseUrl, opts.log, opts.queryStatsFile)
    : await openPglite(join(opts.dataDir, 'pglite'));
  try {
    await migrateDatabase(database);
  } catch (err) {
    await database.close();
    throw err;
  }
  return database;
}

const consoleLog: PoolErrorLog = { error: (fields, message) => console.error(message, fields) };

async function openPostgres(url: string, log: PoolErrorLog = consoleLog, queryStatsFile?: string): Promise<Database> {
  const { default: pg } = await import('pg');
  const { drizzle } = await import('drizzle-orm/node-postgres');
  const pool = new pg.Pool({ connectionString: url, max: 10 });
  pool.on('error', (err) => log.error({ error: err.message }, '[db] idle client error'));
  const db = drizzle(pool, { schema, ...queryCounter(queryStatsFile) }) as unknown as Db;
  const withLock = async <T>(lockId: number, fn: () => Promise<T>): Promise<T> => {
    const client = await pool.connect();
    try {
      await client.query('select pg_advisory_lock($1)', [lockId]);
      return await fn();
    } finally {
      await client.query('select pg_advisory_unlock($1)', [lockId]).catch(() => undefined);
      client.release();
    }
  };
  return {
    db,
    kind: 'postgres',
    ping: async () => void (await pool.query('select 1')),
    withLock,
    close: () => pool.end(),
  };
}

/**
 * With `file` set (SVC_QUERY_STATS_FILE, the benchmarks' cost model), counts the statements this process sends
 * and writes `{"queries": n, "byStatement": {…}}` there every half second. Off by default: no cost on the hot path.
 */
function queryCounter(file: string | undefined): { logger?: { logQuery(query: string): void } } {
  if (!file) return {};
  let queries = 0;
  // The statements by their first words, to tell which ones a path sends (bench output, not production).
  const byStatement: Record<string, number> = {};
  setInterval(() => writeFileSync(file, JSON.stringify({ queries, byStatement })), 500).unref();
  return {
    logger: {
      logQuery: (query: string) => {
        queries += 1;
        const head = query.replace(/\s+/g, ' ').slice(0, 90);
        byStatement[head] = (byStatement[head] ?? 0) + 1;
      },
    },
  };
}

async function openPglite(dir: string): Promise<Database> {
  const { PGlite } = await import('@electric-sql/pglite');
  const { drizzle } = await import('drizzle-orm/pglite');
  mkdirSync(dir, { recursive: true });
  const client = await PGlite.create(dir);
  const db = drizzle(client, { schema }) as unknown as Db;
  return {
    db,
    kind: 'pglite',
    ping: async () => void (await client.query('select 1')),
    withLock: (_id, fn) => fn(),
    close: () => client.close(),
  };
}

async function migrateDatabase(database: Database): Promise<void> {
  if (database.kind === 'pglite') {
    const { migrate } = await import('drizzle-orm/pglite/migrator');
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    await migrate(database.db as any, { migrationsFolder: MIGRATIONS });
    return;
  }
  const { migrate } = await import('drizzle-orm/node-postgres/migrator');
  await database.withLock(MIGRATION_LOCK, async () => {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    await migrate(database.db as any, { migrationsFolder: MIGRATIONS });
  });
}
