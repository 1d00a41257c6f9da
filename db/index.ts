import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { PgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core';
import type Pg from 'pg';
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
  /**
   * LISTENs on `channel` on a connection of its own: `message(payload)` per notification (delivered on commit).
   * `state(false)` when the connection is lost (notifications may be missed until then), `state(true)` once it
   * listens again; it reconnects by itself until `close()`. PGlite (one process) delivers before the commit returns.
   */
  listen(channel: string, handlers: ListenHandlers): Listener;
  close(): Promise<void>;
};
export type ListenHandlers = { message(payload: string): void; state(listening: boolean): void };
export type Listener = {
  /**
   * Resolves true once every notification committed before the call has been handed to `message`; false when
   * that cannot be known now (connection lost). PostgreSQL delivers a notification to another connection some
   * time after the commit returns (tens of milliseconds on a busy host): a round trip on the listening connection
   * is what makes "committed before" mean "already seen". Concurrent calls share one round trip.
   */
  sync(): Promise<boolean>;
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
  const counter = queryCounter(queryStatsFile);
  const db = drizzle(pool, { schema, ...counter }) as unknown as Db;
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
  const listeners = new Set<Listener>();
  return {
    db,
    kind: 'postgres',
    ping: async () => void (await pool.query('select 1')),
    withLock,
    listen(channel, handlers) {
      // Its round trips count as statements in the benchmarks' cost model (each is one, on its own connection).
      const l = pgListener(pg, url, log, channel, handlers, () =>
        counter.logger?.logQuery('select 1 -- listener sync'),
      );
      listeners.add(l);
      return {
        sync: () => l.sync(),
        close: async () => {
          listeners.delete(l);
          await l.close();
        },
      };
    },
    close: async () => {
      await Promise.all([...listeners].map((l) => l.close()));
      await pool.end();
    },
  };
}

/**
 * One client outside the pool holding LISTEN; on error or end it reports the loss and reconnects (backing off).
 * `sync` is a `select 1` on this connection: PostgreSQL sends a listening session its pending notifications
 * before it answers a statement, so when it answers, they have been handled; a `sync` that fails or takes over
 * 2 s answers false. Correctness rests on `sync` alone; a heartbeat every 5 s (lost after 10 s unanswered) keeps
 * an idle connection open through firewalls and finds one that died silently.
 */
function pgListener(
  pg: typeof Pg,
  url: string,
  log: PoolErrorLog,
  channel: string,
  handlers: ListenHandlers,
  onRoundTrip: () => void = () => undefined,
): Listener {
  let client: InstanceType<typeof pg.Client> | undefined;
  // The connection while it listens (undefined while connecting or lost).
  let live: InstanceType<typeof pg.Client> | undefined;
  let closed = false;
  let retry: NodeJS.Timeout | undefined;
  let heartbeat: NodeJS.Timeout | undefined;
  let delayMs = 100;
  const connect = async () => {
    if (closed) return;
    // Named, so an operator (or a test) can tell this backend apart in pg_stat_activity.
    const c = new pg.Client({ connectionString: url, application_name: `svc listen ${process.pid}` });
    client = c;
    let lost = false;
    const onLost = (err?: Error) => {
      if (lost) return;
      lost = true;
      if (live === c) live = undefined;
      clearInterval(heartbeat);
      handlers.state(false);
      c.end().catch(() => undefined);
      if (closed) return;
      log.error({ channel, error: err?.message ?? 'connection ended' }, '[db] listener lost; reconnecting');
      retry = setTimeout(() => void connect(), delayMs);
      delayMs = Math.min(delayMs * 2, 5_000);
    };
    c.on('error', onLost);
    c.on('end', () => onLost());
    c.on('notification', (n) => {
      if (n.channel === channel) handlers.message(n.payload ?? '');
    });
    try {
      await c.connect();
      await c.query(`LISTEN ${c.escapeIdentifier(channel)}`);
    } catch (err) {
      onLost(err as Error);
      return;
    }
    if (lost || closed) return;
    delayMs = 100;
    live = c;
    handlers.state(true);
    let beating = false;
    heartbeat = setInterval(() => {
      if (beating || lost) return;
      beating = true;
      const late = setTimeout(() => onLost(new Error('heartbeat unanswered for 10 s')), 10_000);
      late.unref();
      c.query('select 1').then(
        () => {
          clearTimeout(late);
          beating = false;
        },
        (err: Error) => {
          clearTimeout(late);
          onLost(err);
        },
      );
    }, 5_000);
    heartbeat.unref();
  };
  void connect();

  /** One `select 1` on the listening connection; false if it is not up, fails, or takes over 2 s. */
  const roundTrip = async (): Promise<boolean> => {
    const c = live;
    if (!c) return false;
    onRoundTrip();
    let late: NodeJS.Timeout | undefined;
    const timeout = new Promise<boolean>((resolve) => {
      late = setTimeout(() => resolve(false), 2_000);
    });
    const ok = await Promise.race([
      c.query('select 1').then(
        () => live === c,
        () => false,
      ),
      timeout,
    ]);
    clearTimeout(late);
    return ok;
  };
  // Callers join the next round trip that has not been sent yet: it starts after they asked, so it covers them.
  let running: Promise<unknown> = Promise.resolve();
  let next: Promise<boolean> | undefined;
  return {
    sync() {
      if (next) return next;
      const mine = running.then(() => {
        next = undefined;
        const trip = roundTrip();
        running = trip;
        return trip;
      });
      next = mine;
      return mine;
    },
    async close() {
      closed = true;
      clearTimeout(retry);
      clearInterval(heartbeat);
      handlers.state(false);
      await client?.end().catch(() => undefined);
    },
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
  let written = -1;
  setInterval(() => {
    if (queries === written) return; // an idle process writes nothing (the benchmarks count these writes' CPU)
    written = queries;
    writeFileSync(file, JSON.stringify({ queries, byStatement }));
  }, 500).unref();
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
    listen(channel, handlers) {
      let stopped = false;
      // A failed LISTEN leaves the listener down (state never true): its user falls back to reading the table.
      const unlisten = client
        .listen(channel, (payload) => handlers.message(payload))
        .then((off) => {
          if (!stopped) handlers.state(true);
          return off;
        })
        .catch(() => async () => undefined);
      return {
        // Delivered before the committing statement returns: nothing can be pending.
        sync: async () => !stopped,
        close: async () => {
          stopped = true;
          handlers.state(false);
          await (await unlisten)().catch(() => undefined);
        },
      };
    },
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
