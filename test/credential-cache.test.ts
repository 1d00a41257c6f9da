import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCredentialCache } from '../core/credential-cache.js';
import { credentialHash } from '../core/secrets.js';
import type { ListenHandlers } from '../db/index.js';
import { startApiProcess } from './helpers/api-process.js';
import { FROM_DOMAIN, startSendingStack, type SendingStack } from './helpers/sending.js';
import { eventually, type ApiClient } from './helpers/stack.js';

/**
 * The per-process API-key cache against two API processes on one PostgreSQL: A is the stack in this test
 * process, B a second `main.ts api` process. B's cache is observed from outside by hiding a key's row with the
 * triggers off (session_replication_role = replica, so no notification goes out): B still accepting the key
 * means B answered from its cache, without reading the table.
 */
let env: SendingStack;
let b: Awaited<ReturnType<typeof startApiProcess>>;
let admin: pg.Client;
let accountKey: string;
let domainId: string;

beforeAll(async () => {
  env = await startSendingStack();
  b = await startApiProcess(env.stack);
  admin = new pg.Client({ connectionString: env.stack.config.databaseUrl! });
  await admin.connect();
  accountKey = env.key;
  const domains = (await env.stack.api('GET', '/api/domains', { token: env.session })).body;
  domainId = domains.find((d: any) => d.domain === FROM_DOMAIN).id;
});
afterAll(async () => {
  await admin?.end();
  await b?.stop();
  await env?.stop();
});

let n = 0;
const send = (api: ApiClient, key: string) =>
  api('POST', '/v1/send', {
    token: key,
    body: { from: `hello@${FROM_DOMAIN}`, to: `cc-${++n}@rcpt.test`, subject: 'cache', text: 'x' },
  });
const apiA = () => env.stack.api;

/** Runs `fn` while the key's row cannot be found by its hash, changed without firing a trigger (no notification). */
async function withRowHidden<T>(key: string, fn: () => Promise<T>): Promise<T> {
  const hash = credentialHash(key);
  await admin.query('set session_replication_role = replica');
  try {
    await admin.query(`update api_keys set key_hash = key_hash || '-hidden' where key_hash = $1`, [hash]);
    try {
      return await fn();
    } finally {
      await admin.query(`update api_keys set key_hash = $1 where key_hash = $1 || '-hidden'`, [hash]);
    }
  } finally {
    await admin.query('set session_replication_role = origin');
  }
}

/** True once `api` answers for `key` from its cache: a use (row visible) then a use with the row hidden. */
async function cachedIn(api: ApiClient, key: string): Promise<boolean> {
  expect((await send(api, key)).status).toBe(200);
  return withRowHidden(key, async () => (await send(api, key)).status === 200);
}

/** The backend of a process's LISTEN connection, once it has run LISTEN (then only its heartbeat, `select 1`). */
async function listenerPid(which: 'A' | 'B'): Promise<number | undefined> {
  const mine = `svc listen ${process.pid}`;
  const { rows } = await admin.query(
    `select pid, application_name from pg_stat_activity
      where datname = current_database() and application_name like 'svc listen %'
        and (query ilike 'listen%' or query = 'select 1')`,
  );
  const row = rows.find((r) => (which === 'A' ? r.application_name === mine : r.application_name !== mine));
  return row?.pid;
}

async function scopedKey(): Promise<{ id: string; key: string }> {
  const res = await apiA()('POST', '/api/keys/scoped', { token: env.session, body: { domainId } });
  expect(res.status).toBe(201);
  return res.body;
}

describe('API-key cache across processes', () => {
  it('a key cached in B and rotated through A is refused by B on the very next request', async () => {
    expect((await send(b.api, accountKey)).status).toBe(200);
    await eventually(() => listenerPid('B'), 30_000);
    await eventually(() => cachedIn(b.api, accountKey), 30_000);
    await eventually(() => cachedIn(apiA(), accountKey), 30_000);

    const rotated = await apiA()('POST', '/api/keys/rotate', { token: env.session });
    expect(rotated.status).toBe(200);
    const refused = await send(b.api, accountKey);
    expect(refused.status).toBe(401);
    expect(refused.body.code).toBe('invalid_key');
    expect((await send(apiA(), accountKey)).status).toBe(401);

    // The new key works in both at once: unknown keys are never cached.
    accountKey = rotated.body.key;
    expect((await send(b.api, accountKey)).status).toBe(200);
    expect((await send(apiA(), accountKey)).status).toBe(200);
  });

  it('a scoped key deleted through A, or with its domain, is refused by B at once; a refusal is not cached', async () => {
    const scoped = await scopedKey();
    await eventually(() => cachedIn(b.api, scoped.key), 30_000);
    await eventually(() => cachedIn(apiA(), scoped.key), 30_000);

    expect((await apiA()('DELETE', `/api/keys/scoped/${scoped.id}`, { token: env.session })).body).toEqual({
      ok: true,
    });
    expect((await send(b.api, scoped.key)).status).toBe(401);
    expect((await send(apiA(), scoped.key)).status).toBe(401);

    // Removing the domain deletes its scoped keys on another path: the trigger tells every process all the same.
    const other = (await apiA()('POST', '/api/domains/subdomain', { token: env.session, body: { subdomain: 'other' } }))
      .body.domain;
    const onOther = (await apiA()('POST', '/api/keys/scoped', { token: env.session, body: { domainId: other.id } }))
      .body;
    const me = (api: ApiClient) => api('GET', '/v1/me', { token: onOther.key });
    await eventually(async () => {
      expect((await me(b.api)).status).toBe(200);
      return withRowHidden(onOther.key, async () => (await me(b.api)).status === 200);
    }, 30_000);
    expect((await apiA()('DELETE', `/api/domains/${other.id}`, { token: env.session })).status).toBe(200);
    expect((await me(b.api)).status).toBe(401);

    // A refusal is not remembered: a key that appears right after being refused works at once.
    const fresh = `svc_live_cachetest${Date.now()}`;
    expect((await send(b.api, fresh)).status).toBe(401);
    await admin.query(
      `insert into api_keys (id, user_id, kind, key_hash, key_sealed, created_at)
         select 'key_cachetest', user_id, 'scoped', $1, 'unused', 0 from api_keys where key_hash = $2`,
      [credentialHash(fresh), credentialHash(accountKey)],
    );
    await admin.query(`update api_keys set domain_id = $1 where id = 'key_cachetest'`, [domainId]);
    expect((await send(b.api, fresh)).status).toBe(200);
  });

  it('a cached key costs no pooled statement on the accept path; last_used_at is written at most once a minute', async () => {
    const core = env.stack.service.core;
    // Every statement the in-process service sends outside a transaction goes through the pool's query. (A hit's
    // one other cost, the listener's shared `select 1` that confirms no revocation is in flight, reads no table.)
    const pool = (core.db as unknown as { $client: pg.Pool }).$client;
    const statements: string[] = [];
    const query = pool.query.bind(pool) as (...args: unknown[]) => unknown;
    (pool as any).query = (...args: unknown[]) => {
      const q = args[0];
      statements.push(typeof q === 'string' ? q : ((q as { text?: string }).text ?? ''));
      return query(...args);
    };
    try {
      await eventually(() => cachedIn(apiA(), accountKey), 30_000);
      const hits = core.keys.cache.stats.hits;
      statements.length = 0;
      for (let i = 0; i < 5; i++) expect((await send(apiA(), accountKey)).status).toBe(200);
      expect(statements.length).toBeGreaterThan(0);
      expect(statements.filter((s) => s.includes('"api_keys"'))).toEqual([]);
      expect(core.keys.cache.stats.hits - hits).toBe(5);
    } finally {
      (pool as any).query = query;
    }
    const { rows } = await admin.query('select last_used_at from api_keys where key_hash = $1', [
      credentialHash(accountKey),
    ]);
    expect(Number(rows[0].last_used_at)).toBeGreaterThan(Date.now() - 120_000);
  });

  it('when B loses its LISTEN connection its cache is emptied and bypassed, and it recovers once B listens again', async () => {
    const silent = await scopedKey();
    const revoked = await scopedKey();
    await eventually(() => cachedIn(b.api, silent.key), 30_000);
    await eventually(() => cachedIn(b.api, revoked.key), 30_000);

    const pid = (await listenerPid('B'))!;
    await admin.query('select pg_terminate_backend($1)', [pid]);
    await eventually(
      async () => (await admin.query('select 1 from pg_stat_activity where pid = $1', [pid])).rowCount === 0,
    );
    // Deleted with the triggers off: no notification at all. B must not answer from what it cached before.
    await admin.query('set session_replication_role = replica');
    await admin.query('delete from api_keys where id = $1', [silent.id]);
    await admin.query('set session_replication_role = origin');
    expect((await send(b.api, silent.key)).status).toBe(401);
    // A revocation right after the loss is honoured too.
    expect((await apiA()('DELETE', `/api/keys/scoped/${revoked.id}`, { token: env.session })).status).toBe(200);
    expect((await send(b.api, revoked.key)).status).toBe(401);

    // B listens again on a new connection, caches again, and a rotation reaches it.
    await eventually(async () => {
      const next = await listenerPid('B');
      return next !== undefined && next !== pid;
    }, 30_000);
    await eventually(() => cachedIn(b.api, accountKey), 30_000);
    const rotated = await apiA()('POST', '/api/keys/rotate', { token: env.session });
    expect((await send(b.api, accountKey)).status).toBe(401);
    accountKey = rotated.body.key;
    expect((await send(b.api, accountKey)).status).toBe(200);
  });
});

describe('credential cache bounds', () => {
  /** A stand-in for the database's LISTEN: the test says when it is up, what it delivers, whether it is current. */
  function fakeListen() {
    let handlers: ListenHandlers | undefined;
    const l = {
      current: true,
      /** While set, every sync waits for it (a round trip in flight). */
      held: undefined as Promise<void> | undefined,
      listen: (_channel: string, h: ListenHandlers) => {
        handlers = h;
        return {
          sync: async () => {
            await l.held;
            return l.current;
          },
          close: async () => undefined,
        };
      },
      get handlers() {
        return handlers!;
      },
    };
    return l;
  }

  it('evicts the least recently used entry past its size, expires entries after the TTL, serves nothing while down', async () => {
    const l = fakeListen();
    let clock = 1_000;
    const cache = createCredentialCache<string>({ listen: l.listen, maxEntries: 2, ttlMs: 30_000, now: () => clock });
    expect(await cache.get('a')).toBeUndefined(); // the first lookup opens the listener
    l.handlers.state(true);
    cache.set('a', 'A', cache.stamp());
    cache.set('b', 'B', cache.stamp());
    expect(await cache.get('a')).toBe('A'); // a is now the most recent
    cache.set('c', 'C', cache.stamp());
    expect([await cache.get('a'), await cache.get('b'), await cache.get('c')]).toEqual(['A', undefined, 'C']);

    // A hit the listener cannot confirm as current is not served.
    l.current = false;
    expect(await cache.get('a')).toBeUndefined();
    l.current = true;

    // A read that began before an invalidation does not fill the cache.
    const stamp = cache.stamp();
    l.handlers.message('x');
    cache.set('b', 'B', stamp);
    expect(await cache.get('b')).toBeUndefined();
    l.handlers.message('a');
    expect(await cache.get('a')).toBeUndefined();
    l.handlers.message('');
    expect(cache.size).toBe(0);

    cache.set('d', 'D', cache.stamp());
    l.handlers.state(false);
    expect(await cache.get('d')).toBeUndefined();
    cache.set('d', 'D', cache.stamp());
    expect(cache.size).toBe(0);

    l.handlers.state(true);
    cache.set('e', 'E', cache.stamp());
    clock += 29_999;
    expect(await cache.get('e')).toBe('E');
    clock += 1;
    expect(await cache.get('e')).toBeUndefined();
    await cache.close();
  });

  it('serves a hit whose entry another request refilled during its sync; an invalidation during it is a miss', async () => {
    const l = fakeListen();
    const cache = createCredentialCache<string>({ listen: l.listen });
    await cache.get('k');
    l.handlers.state(true);
    cache.set('k', 'old copy', cache.stamp());

    // Concurrent hits wait on one sync while a request that read the row (after the last invalidation) sets it again.
    let release!: () => void;
    l.held = new Promise((r) => (release = r));
    const waiting = [cache.get('k'), cache.get('k'), cache.get('k')];
    cache.set('k', 'fresh copy', cache.stamp());
    release();
    expect(await Promise.all(waiting)).toEqual(['fresh copy', 'fresh copy', 'fresh copy']);
    expect(cache.stats).toMatchObject({ hits: 3, misses: 0 });

    // A revocation delivered while the hits wait on their sync: none of them is served.
    l.held = new Promise((r) => (release = r));
    const revoked = [cache.get('k'), cache.get('k')];
    l.handlers.message('k');
    release();
    expect(await Promise.all(revoked)).toEqual([undefined, undefined]);
    await cache.close();
  });
});
