import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { drizzle } from 'drizzle-orm/node-postgres';
import { inArray } from 'drizzle-orm';
import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { openDatabase, schema, type Database, type Db } from '../db/index.js';
import { createAcceptWriter, type Accept } from '../core/sending/accept-writer.js';
import { createUsageService, dayKey, monthKey } from '../core/usage.js';
import { newId } from '../core/ids.js';
import { DEFAULT_PLANS } from '../core/plans.js';
import { createTestDatabase } from './helpers/pg.js';

/**
 * Group commit of accepted sends (core/sending/accept-writer.ts) against PostgreSQL: a send writes at once when
 * nothing is under way, sends ready meanwhile share one statement, every caller resolves only once its rows
 * are written, and a failed statement fails no caller whose own rows could be written.
 */
let pgdb: Awaited<ReturnType<typeof createTestDatabase>>;
let database: Database;
let pool: pg.Pool;
let db: Db;
let statements = 0;

beforeAll(async () => {
  pgdb = await createTestDatabase();
  database = await openDatabase({ databaseUrl: pgdb.url, dataDir: mkdtempSync(join(tmpdir(), 'svc-accept-writer-')) });
  pool = new pg.Pool({ connectionString: pgdb.url, max: 10 });
  db = drizzle(pool, { schema, logger: { logQuery: () => void (statements += 1) } }) as unknown as Db;
});
afterAll(async () => {
  await pool?.end();
  await database?.close();
  await pgdb?.drop();
});
beforeEach(() => {
  statements = 0;
});

const usage = () =>
  createUsageService({
    db: database.db,
    plans: DEFAULT_PLANS,
    defaultPlan: 'unlimited',
  });

function accept(userId: string, recipients = 1, id = newId('msg')): Accept {
  const now = Date.now();
  const to = Array.from({ length: recipients }, (_, i) => `r${i}@rcpt.test`);
  return {
    userId,
    recipients,
    rows: [
      {
        id,
        userId,
        direction: 'outbound',
        kind: 'user',
        fromAddr: 'a@sender.test',
        toAddrs: to,
        status: 'queued',
        createdAt: now,
        updatedAt: now,
      },
    ],
  };
}

async function counters(userId: string) {
  const rows = await database.db
    .select()
    .from(schema.usageCounters)
    .where(inArray(schema.usageCounters.userId, [userId]));
  return {
    day: rows.find((r) => r.period === dayKey())?.count ?? 0,
    month: rows.find((r) => r.period === monthKey())?.count ?? 0,
  };
}
const written = async (ids: string[]) =>
  (await database.db.select({ id: schema.messages.id }).from(schema.messages).where(inArray(schema.messages.id, ids)))
    .length;

describe('accept writer (group commit)', () => {
  it('writes a send at once when no write is under way: one statement, no waiting for company', async () => {
    const flushes: number[] = [];
    const writer = createAcceptWriter({ db, usage: usage(), onFlush: (n) => flushes.push(n) });
    const a = accept('usr_alone', 2);
    const done = writer.write(a);
    // The statement left before write() returned: no timer, no batching delay.
    expect(flushes).toEqual([1]);
    await done;
    expect(statements).toBe(1);
    expect(await written([a.rows[0]!.id!])).toBe(1);
    expect(await counters('usr_alone')).toEqual({ day: 2, month: 2 });
  });

  it('commits concurrent sends of several accounts in fewer statements than sends, each counted', async () => {
    const flushes: number[] = [];
    const writer = createAcceptWriter({ db, usage: usage(), onFlush: (n) => flushes.push(n) });
    const users = ['usr_g1', 'usr_g2', 'usr_g3'];
    const sends = Array.from({ length: 60 }, (_, i) => accept(users[i % 3]!, 1 + (i % 2)));
    await Promise.all(sends.map((a) => writer.write(a)));
    // The first four went alone (four statements may be under way at once); the 56 that were ready while
    // they were shared the next statement.
    expect(flushes).toEqual([1, 1, 1, 1, 56]);
    expect(statements).toBe(5);
    expect(await written(sends.map((a) => a.rows[0]!.id!))).toBe(60);
    for (const u of users) {
      const n = sends.filter((a) => a.userId === u).reduce((t, a) => t + a.recipients, 0);
      expect(await counters(u)).toEqual({ day: n, month: n });
    }
  });

  it('rejects every caller of a group whose statement fails, and counts nothing for them', async () => {
    const writer = createAcceptWriter({ db, usage: usage() });
    // Rows whose ids are taken: the group's statement fails, and so does each send alone.
    const taken = Array.from({ length: 5 }, () => accept('usr_fail'));
    await Promise.all(taken.map((a) => writer.write(a)));
    const before = await counters('usr_fail');
    const plug = accept('usr_plug');
    const again = taken.map((a) => accept('usr_fail', 1, a.rows[0]!.id!));
    const results = await Promise.allSettled([writer.write(plug), ...again.map((a) => writer.write(a))]);
    expect(results[0]!.status).toBe('fulfilled');
    expect(results.slice(1).every((r) => r.status === 'rejected')).toBe(true);
    expect(await counters('usr_fail')).toEqual(before);
  });

  it('fails only the send whose own row cannot be written; the rest of its group is written', async () => {
    const writer = createAcceptWriter({ db, usage: usage() });
    const first = accept('usr_mixed');
    await writer.write(first);
    const plug = accept('usr_plug2');
    const good = Array.from({ length: 4 }, () => accept('usr_mixed'));
    const bad = accept('usr_mixed', 1, first.rows[0]!.id!);
    const results = await Promise.allSettled([plug, good[0]!, good[1]!, bad, good[2]!, good[3]!].map(writer.write));
    expect(results.map((r) => r.status)).toEqual([
      'fulfilled',
      'fulfilled',
      'fulfilled',
      'rejected',
      'fulfilled',
      'fulfilled',
    ]);
    expect(await written(good.map((a) => a.rows[0]!.id!))).toBe(4);
    expect(await counters('usr_mixed')).toEqual({ day: 5, month: 5 });
  });
});
