import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, type Database } from '../db/index.js';
import { parseShaping } from '../core/shaping/config.js';
import { createShaper } from '../core/shaping/shaper.js';
import { createConnectionPool } from '../core/shaping/connections.js';
import { createShapingStore } from '../core/shaping/store.js';
import { freePort } from './helpers/ports.js';
import { startShapingMx } from './helpers/shaping-mx.js';
import { createTestDatabase } from './helpers/pg.js';

/**
 * The shared shaping state in PostgreSQL (core/shaping/store.ts) as two workers see it: connection
 * leases up to the limit and back when they expire (a crashed worker), the message bucket, and what
 * automation rules record (a suspension, a SetConfig override) as admission sees it.
 */
let pg: Awaited<ReturnType<typeof createTestDatabase>>;
let database: Database;

beforeAll(async () => {
  pg = await createTestDatabase();
  database = await openDatabase({ databaseUrl: pg.url, dataDir: mkdtempSync(join(tmpdir(), 'svc-shaping-store-')) });
});
afterAll(async () => {
  await database?.close();
  await pg?.drop();
});

const limits = { connection_limit: 2 };

describe('shaping state in PostgreSQL', () => {
  it("grants at most connection_limit leases across holders, and a crashed holder's leases come back when they expire", async () => {
    const store = createShapingStore(database.db);
    await store.touch('mx.lease.test', limits, 'lease.test', { message: 1, connection: 1 });
    const now = Date.now();
    const opts = (holder: string, ttlMs = 60_000) => ({ holder, limit: 2, rate: null, burst: 1, ttlMs });
    // Two workers asking at once for three slots: exactly two are granted.
    const asked = await Promise.all([
      store.acquireLease('mx.lease.test', opts('a', 1000), now),
      store.acquireLease('mx.lease.test', opts('b'), now),
      store.acquireLease('mx.lease.test', opts('b'), now),
    ]);
    expect(asked.filter((r) => 'id' in r)).toHaveLength(2);
    expect(asked.find((r) => !('id' in r))).toMatchObject({ why: 'connection_limit 2 reached' });
    if (!('id' in asked[0]!)) {
      // "a" lost the race: give one of b's slots to a short lease, as a crashed worker would leave it.
      await store.releaseLease((asked.find((r) => 'id' in r) as { id: string }).id);
      expect('id' in (await store.acquireLease('mx.lease.test', opts('a', 1000), now))).toBe(true);
    }
    // Worker "a" dies holding its lease: once it has expired the slot is free again, and only that one.
    const later = await store.acquireLease('mx.lease.test', opts('c'), now + 1001);
    expect('id' in later).toBe(true);
    expect(await store.acquireLease('mx.lease.test', opts('d'), now + 1002)).toMatchObject({
      why: 'connection_limit 2 reached',
    });
    // A released lease frees its slot at once.
    await store.releaseLease((later as { id: string }).id);
    expect('id' in (await store.acquireLease('mx.lease.test', opts('d'), now + 1003))).toBe(true);
  });

  it('paces new connections by max_connection_rate', async () => {
    const store = createShapingStore(database.db);
    await store.touch('mx.connrate.test', limits, 'connrate.test', { message: 1, connection: 1 });
    const now = Date.now();
    const opts = { holder: 'a', limit: 10, rate: 1, burst: 1, ttlMs: 60_000 };
    expect('id' in (await store.acquireLease('mx.connrate.test', opts, now))).toBe(true);
    expect(await store.acquireLease('mx.connrate.test', opts, now + 100)).toMatchObject({
      why: 'max_connection_rate reached',
      waitMs: 900,
    });
    expect('id' in (await store.acquireLease('mx.connrate.test', opts, now + 1000))).toBe(true);
  });

  it('takes message tokens up to the burst, refills at the rate, and takes none while suspended', async () => {
    const store = createShapingStore(database.db);
    await store.touch('mx.bucket.test', limits, 'bucket.test', { message: 3, connection: 1 });
    const now = Date.now() + 10;
    const takes = [];
    for (let i = 0; i < 4; i++) takes.push(await store.takeMessage('mx.bucket.test', 10, 3, now));
    expect(takes.map((t) => t.taken)).toEqual([true, true, true, false]);
    expect((await store.takeMessage('mx.bucket.test', 10, 3, now + 100)).taken).toBe(true);
    await store.suspend('mx.bucket.test', now + 5000, 'rule', '421 busy', now);
    const suspended = await store.takeMessage('mx.bucket.test', 10, 3, now + 1000);
    expect(suspended).toMatchObject({ taken: false, suspendedUntil: now + 5000, suspendCause: '421 busy' });
    // A shorter suspension does not cut a longer one short.
    await store.suspend('mx.bucket.test', now + 2000, 'rule', '421 other', now + 1000);
    expect(await store.state('mx.bucket.test')).toMatchObject({ suspendedUntil: now + 5000, suspendCause: '421 busy' });
    expect(
      await store.acquireLease(
        'mx.bucket.test',
        { holder: 'a', limit: 5, rate: null, burst: 1, ttlMs: 1000 },
        now + 1000,
      ),
    ).toMatchObject({ why: 'suspended: 421 busy' });
  });

  it('automation rules: Suspend makes admission wait for the suspension, SetConfig changes the limits in force', async () => {
    const config = parseShaping(`
["default"]
connection_limit = 4

[["default".automation]]
regex = '^421[ -]4\\.7\\.28'
action = "Suspend"
duration = "1h"

[["default".automation]]
regex = '(?i)too many connections'
action = { SetConfig = { name = "connection_limit", value = "1" } }
duration = "1h"

[["default".automation]]
regex = '^452 4\\.5\\.3'
action = { SetConfig = { name = "max_message_rate", value = "2/s" } }
duration = "1h"
`);
    const shaper = createShaper({
      db: database.db,
      config,
      smtp: { port: 25, heloName: 'test', timeoutMs: 1000 },
      resolveMx: async () => [],
      addressOf: async () => '127.0.0.1',
      stateCacheMs: 0,
    });
    const site = await shaper.site('rules.test', ['mx.rules.test']);
    expect(await shaper.admit(site)).toEqual({ limits: expect.objectContaining({ connectionLimit: 4 }) });

    expect((await shaper.observe(site, '421 4.3.2 Too many connections from your IP'))?.pattern).toBe(
      '(?i)too many connections',
    );
    expect(await shaper.admit(site)).toEqual({ limits: expect.objectContaining({ connectionLimit: 1 }) });
    expect(await shaper.observe(site, '550 5.1.1 No such user')).toBeUndefined();

    await shaper.observe(site, '452 4.5.3 slow down');
    const rated = await shaper.admit(site);
    expect(rated).toEqual({
      limits: expect.objectContaining({
        connectionLimit: 1,
        maxMessageRate: expect.objectContaining({ perSecond: 2 }),
      }),
    });

    await shaper.observe(site, '421-4.7.28 rate limited');
    const waiting = await shaper.admit(site);
    expect(waiting).toMatchObject({
      throttled: true,
      site: 'mx.rules.test',
      cause: 'suspended: 421-4.7.28 rate limited',
    });
    expect((waiting as { waitMs: number }).waitMs).toBeGreaterThan(3_500_000);
    const actions = (await createShapingStore(database.db).list()).active
      .filter((a) => a.site === 'mx.rules.test')
      .map((a) => a.action)
      .sort();
    expect(actions).toEqual(['SetConfig connection_limit=1', 'SetConfig max_message_rate=2/s', 'Suspend']);
    await shaper.close();
  });

  it('a pool asks the store for a slot only when it holds none of the limit: connections rolling over never get a refusal, nothing waits on a timer', async () => {
    const port = await freePort();
    const mx = await startShapingMx({ host: '127.0.0.5', port });
    const store = createShapingStore(database.db);
    const answers: string[] = [];
    const counting = {
      ...store,
      acquireLease: async (...args: Parameters<typeof store.acquireLease>) => {
        const r = await store.acquireLease(...args);
        answers.push('id' in r ? 'granted' : r.why);
        return r;
      },
    };
    const pool = createConnectionPool({
      store: counting,
      holder: 'pool-test',
      smtp: { port, heloName: 'test', timeoutMs: 5000 },
      addressOf: async () => '127.0.0.5',
    });
    const lim = { connectionLimit: 2, maxMessageRate: null, maxConnectionRate: null, maxDeliveriesPerConnection: 3 };
    const site = {
      key: 'mx.rollover.test',
      domain: 'rollover.test',
      hosts: ['mx.rollover.test'],
      limits: lim,
      rules: [],
      sources: ['default'],
    };
    try {
      // 40 messages, 10 at a time, over 2 connections of 3 messages each: 14 connections one after another.
      const results = await Promise.all(
        Array.from({ length: 10 }, async (_, lane) => {
          const out: string[] = [];
          for (let i = lane; i < 40; i += 10) {
            const r = await pool.send(
              site,
              lim,
              { from: 'a@test', to: [`r${i}@rollover.test`] },
              Buffer.from('Subject: x\r\n\r\nx\r\n'),
              async () => undefined,
            );
            out.push('info' in r ? 'sent' : 'throttled' in r ? `throttled: ${r.cause}` : `error: ${r.err.message}`);
          }
          return out;
        }),
      );
      expect(results.flat().filter((r) => r !== 'sent')).toEqual([]);
      expect(answers.filter((a) => a !== 'granted')).toEqual([]);
      expect(answers.length).toBeGreaterThanOrEqual(40 / 3);
      expect(mx.maxOpen).toBeLessThanOrEqual(2);
      for (let i = 0; i < 40; i++) expect(mx.copies.get(`r${i}@rollover.test`)).toBe(1);
    } finally {
      await pool.close();
      await mx.close();
    }
  });
});
