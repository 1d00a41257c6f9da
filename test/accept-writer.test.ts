import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { drizzle } from 'drizzle-orm/node-postgres';
import { eq, getTableColumns, inArray, sql } from 'drizzle-orm';
import { boolean, integer, jsonb, pgTable, text } from 'drizzle-orm/pg-core';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { openDatabase, schema, type Database, type Db } from '../db/index.js';
import { createAcceptWriter, type Accept } from '../core/sending/accept-writer.js';
import { arrayInsert } from '../core/array-insert.js';
import { isLeaseLost, LEASE_LOST, type LeaseUse } from '../core/gate/cap-lease.js';
import { dayKey, DB_NOW_MS, monthKey, outboundCounts } from '../core/usage.js';
import { newId } from '../core/ids.js';
import { countingDatabase, quietPool } from './helpers/counting-db.js';

/**
 * Group commit of accepted sends (core/sending/accept-writer.ts) against PostgreSQL: a send writes at once when
 * nothing is under way, sends ready meanwhile share one statement, every caller resolves only once its rows
 * are written, and a failed statement fails no caller whose own rows could be written.
 */
let t: Awaited<ReturnType<typeof countingDatabase>>;
let database: Database;
/** A handle that counts its statements (`t.counted`): the writers under test get this one. */
let db: Db;

beforeAll(async () => {
  t = await countingDatabase('accept-writer');
  ({ database, db } = t);
});
afterAll(async () => {
  await t?.close();
});
beforeEach(() => t.reset());

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
    const writer = createAcceptWriter({ db, onFlush: (n) => flushes.push(n) });
    const a = accept('usr_alone', 2);
    const done = writer.write(a);
    // The statement left before write() returned: no timer, no batching delay.
    expect(flushes).toEqual([1]);
    await done;
    expect(t.counted.statements).toBe(1);
    expect(await written([a.rows[0]!.id!])).toBe(1);
    expect(await counters('usr_alone')).toEqual({ day: 2, month: 2 });
  });

  it('commits concurrent sends of several accounts in fewer statements than sends, each counted', async () => {
    const flushes: number[] = [];
    const writer = createAcceptWriter({ db, onFlush: (n) => flushes.push(n) });
    const users = ['usr_g1', 'usr_g2', 'usr_g3'];
    const sends = Array.from({ length: 60 }, (_, i) => accept(users[i % 3]!, 1 + (i % 2)));
    await Promise.all(sends.map((a) => writer.write(a)));
    // The first four went alone (four statements may be under way at once); the 56 that were ready while
    // they were shared the next statement.
    expect(flushes).toEqual([1, 1, 1, 1, 56]);
    expect(t.counted.statements).toBe(5);
    expect(await written(sends.map((a) => a.rows[0]!.id!))).toBe(60);
    for (const u of users) {
      const n = sends.filter((a) => a.userId === u).reduce((t, a) => t + a.recipients, 0);
      expect(await counters(u)).toEqual({ day: n, month: n });
    }
  });

  it('rejects every caller of a group whose statement fails, and counts nothing for them', async () => {
    const writer = createAcceptWriter({ db });
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
    const writer = createAcceptWriter({ db });
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

type Row = typeof schema.messages.$inferInsert;
/** Text that needs escaping in an array literal, in SQL and in JSON. */
const tricky = `quote " apostrophe ' backslash \\ \\" braces {a,b} NULL, comma tab\t newline\n é 漢字 😀 \u2028 $1 ?`;

/** Rows that between them leave columns undefined, null, empty, and set, with values that need escaping. */
function varied(userId: string): Row[] {
  const now = Date.now();
  const base = {
    userId,
    direction: 'outbound',
    kind: 'user',
    status: 'queued',
    createdAt: now,
    updatedAt: now,
  } as const;
  return [
    // The fewest columns: the rest are null or their defaults.
    { ...base, id: newId('msg'), fromAddr: 'a@sender.test', toAddrs: ['r@rcpt.test'] },
    // Every column set.
    {
      ...base,
      id: newId('msg'),
      domainId: 'dom_1',
      fromAddr: `"Ünïcode \\" <a@sender.test>`,
      toAddrs: ['"x, y" <r@rcpt.test>', tricky],
      ccAddrs: [],
      bccAddrs: [tricky],
      replyTo: tricky,
      subject: tricky,
      html: `<p class="a">${tricky}</p>`,
      text: 'NULL',
      headers: { 'X-Quote': tricky, 'X-Empty': '' },
      metadata: { s: tricky, n: 1.5, b: false, z: null, big: 9007199254740991 },
      status: 'scheduled',
      workflowId: 'wf',
      attempts: 3,
      lastError: '',
      smtpMessageId: '<id@x>',
      sentAt: now + 1,
      inReplyTo: tricky,
      trackOpens: 1,
      trackClicks: 1,
      attachments: [{ filename: tricky, contentType: 'text/plain', url: 'https://x.test/a?b=1&c="2"' }],
      scheduledSendId: 'ssnd_1',
      bounceType: null,
      nextAttemptAt: 2 ** 50,
      threadId: tricky,
      auth: { key: 'k', spf: null },
      envelopeFrom: 'b@x.test',
      receivedAt: 0,
      sizeBytes: 2 ** 31 - 1,
      recipients: { [tricky]: { status: 'pending', attempts: 0 } },
      trail: [],
      enrols: true,
      spam: { nested: { deep: [1, '2', null, { k: tricky }] } },
      heldReason: tricky,
      heldUntil: -1,
      releasedAt: now,
    },
    // Explicit nulls and falsy values where the first row leaves the column undefined.
    {
      ...base,
      id: newId('msg'),
      fromAddr: '',
      toAddrs: [],
      ccAddrs: null,
      headers: {},
      metadata: null,
      subject: '',
      trackOpens: 0,
      enrols: false,
    },
  ];
}

/** Each row as PostgreSQL holds it (every column but the id), by id. */
async function stored(q: Db, ids: string[]): Promise<Map<string, string>> {
  const r = (await q.execute(
    sql`select id, (to_jsonb(m) - 'id')::text as row from ${schema.messages} m where id = any(${sql.param(ids)}::text[])`,
  )) as unknown as { rows: { id: string; row: string }[] };
  return new Map(r.rows.map((x) => [x.id, x.row]));
}

/** Writes `rows` through `write`, and copies of them (other ids) with drizzle's multi-row insert: each pair equal. */
async function expectAsDrizzle(q: Db, rows: Row[], write: () => Promise<unknown>) {
  const copies = rows.map((r) => ({ ...r, id: newId('msg') }));
  await write();
  await q.insert(schema.messages).values(copies);
  const got = await stored(
    q,
    rows.map((r) => r.id!),
  );
  const want = await stored(
    q,
    copies.map((r) => r.id!),
  );
  expect(got.size).toBe(rows.length);
  for (const [i, r] of rows.entries()) expect(got.get(r.id!)).toBe(want.get(copies[i]!.id));
}

describe('accept writer statements (one text per shape)', () => {
  it('writes every column as the drizzle insert it replaced would: nulls, defaults, JSON, escaping', async () => {
    const writer = createAcceptWriter({ db });
    const rows = varied('usr_cols');
    // One group whose rows set `attempts`, `track_*` and `enrols` in some rows only.
    await expectAsDrizzle(database.db, rows, () => writer.write({ userId: 'usr_cols', rows, recipients: 3 }));
    const all = t.counted.texts.at(-1)!;
    // One where no row sets `attempts` or `track_clicks`: left out of the statement, so PostgreSQL's default.
    const some = [varied('usr_cols')[0]!, varied('usr_cols')[2]!];
    await expectAsDrizzle(database.db, some, () => writer.write({ userId: 'usr_cols', rows: some, recipients: 2 }));
    const fewer = t.counted.texts.at(-1)!;
    // No recipient to count: the rows alone.
    const alone = varied('usr_cols');
    await expectAsDrizzle(database.db, alone, () => writer.write({ userId: 'usr_cols', rows: alone, recipients: 0 }));
    expect(t.counted.texts.at(-1)).toMatch(/^insert into "messages"/);
    // Every column of the table is in the statement, but those no row of its group set.
    for (const c of Object.values(getTableColumns(schema.messages))) {
      expect(all).toContain(`"${c.name}"`);
      if (c.name === 'attempts' || c.name === 'track_clicks') expect(fewer).not.toContain(`"${c.name}"`);
      else expect(fewer).toContain(`"${c.name}"`);
    }
    // Read back through drizzle: JSON is stored once encoded (an object, not a string holding one).
    const [back] = await database.db.select().from(schema.messages).where(eq(schema.messages.id, rows[1]!.id!));
    expect(back).toEqual(rows[1]);
  });

  it('writes a group of sends with different columns set in one statement, each row as drizzle would', async () => {
    const flushes: number[] = [];
    const writer = createAcceptWriter({ db, onFlush: (n) => flushes.push(n) });
    const plugs = Array.from({ length: 4 }, () => writer.write(accept('usr_plug3')));
    const rows = [...varied('usr_mix2'), ...varied('usr_mix2')];
    await expectAsDrizzle(database.db, rows, () =>
      Promise.all([...plugs, ...rows.map((r) => writer.write({ userId: 'usr_mix2', rows: [r], recipients: 1 }))]),
    );
    expect(flushes).toEqual([1, 1, 1, 1, 6]);
    expect(await counters('usr_mix2')).toEqual({ day: 6, month: 6 });
  });

  it('sends the same text for a group of one and a group of many, prepared once per connection', async () => {
    const one = quietPool(t.url, 1);
    try {
      const seen: string[] = [];
      const db1 = drizzle(one, { schema, logger: { logQuery: (q: string) => void seen.push(q) } }) as unknown as Db;
      const writer = createAcceptWriter({ db: db1 });
      await writer.write(accept('usr_text', 1));
      await Promise.all(Array.from({ length: 30 }, (_, i) => writer.write(accept(`usr_text${i % 3}`, 2))));
      expect(seen.length).toBeLessThan(31);
      expect(new Set(seen).size).toBe(1);
      const { rows } = await one.query<{ name: string }>(`select name from pg_prepared_statements`);
      expect(rows.map((r) => r.name)).toEqual([expect.stringMatching(/^accept_counters_/)]);
    } finally {
      await one.end();
    }
  });

  it('counts each (account, period) once, summed, in lock order', () => {
    const counts = [
      { userId: 'usr_b', n: 2 },
      { userId: 'usr_a', n: 1, day: 'd:2020-01-01', month: 'm:2020-01' },
      { userId: 'usr_b', n: 3 },
      { userId: 'usr_c', n: 0 },
      { userId: 'usr_a', n: 4 },
      { userId: 'usr_a', n: 5, day: 'd:2020-01-01', month: 'm:2020-01' },
    ];
    const now = new Date();
    expect(outboundCounts(counts, now)).toEqual([
      { userId: 'usr_a', period: 'd:2020-01-01', count: 6 },
      { userId: 'usr_a', period: dayKey(now), count: 4 },
      { userId: 'usr_a', period: 'm:2020-01', count: 6 },
      { userId: 'usr_a', period: monthKey(now), count: 4 },
      { userId: 'usr_b', period: dayKey(now), count: 5 },
      { userId: 'usr_b', period: monthKey(now), count: 5 },
    ]);
    expect(outboundCounts([{ userId: 'usr_c', n: 0 }])).toEqual([]);
  });
});

/** A lease row of `userId` holding `amount`, for the day and month given, expiring in `ttlMs`. */
async function leaseOf(
  q: Db,
  userId: string,
  amount: number,
  opts: { day?: string; month?: string; ttlMs?: number } = {},
) {
  const lease = { id: newId('lease'), userId, day: opts.day ?? dayKey(), month: opts.month ?? monthKey(), amount };
  await q.insert(schema.capLeases).values({
    ...lease,
    holder: 'h_test',
    expiresAt: sql`${DB_NOW_MS} + ${opts.ttlMs ?? 30_000}::bigint`,
  });
  return lease;
}
const use = (l: { id: string; userId: string; day: string; month: string }, n: number, caps: LeaseUse['caps']) => ({
  ...l,
  n,
  caps,
});
const leaseLeft = async (q: Db, id: string) =>
  (await q.select({ amount: schema.capLeases.amount }).from(schema.capLeases).where(eq(schema.capLeases.id, id)))[0]
    ?.amount;
async function countersOf(q: Db, userId: string) {
  const rows = await q.select().from(schema.usageCounters).where(eq(schema.usageCounters.userId, userId));
  return Object.fromEntries(rows.map((r) => [r.period, r.count]));
}
const messageCount = async (q: Db, userId: string) =>
  (await q.select({ id: schema.messages.id }).from(schema.messages).where(eq(schema.messages.userId, userId))).length;

/** The lease shape on either driver: moves recipients off the lease, or raises LEASE_LOST and writes nothing. */
async function leaseShape(q: Db, writer: ReturnType<typeof createAcceptWriter>, tag: string) {
  const u = `usr_lease_${tag}`;
  const l = await leaseOf(q, u, 5);
  const first = accept(u, 2);
  await writer.write({ ...first, lease: use(l, 2, { day: 10, month: null }) });
  expect(await leaseLeft(q, l.id)).toBe(3);
  expect(await countersOf(q, u)).toEqual({ [dayKey()]: 2, [monthKey()]: 2 });
  // More than the lease holds; past the day cap the send found; an expired lease: each raises, nothing written.
  const expired = await leaseOf(q, u, 5, { ttlMs: -1 });
  for (const [lease, n, caps] of [
    [l, 4, { day: 10, month: null }],
    [l, 1, { day: 2, month: null }],
    [l, 1, { day: null, month: 2 }],
    [expired, 1, { day: null, month: null }],
  ] as const) {
    const a = accept(u, n);
    const err = await writer.write({ ...a, lease: use(lease, n, caps) }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isLeaseLost(err)).toBe(true);
    expect(String((err as Error).message)).toContain(LEASE_LOST);
  }
  expect(await leaseLeft(q, l.id)).toBe(3);
  expect(await leaseLeft(q, expired.id)).toBe(5);
  expect(await countersOf(q, u)).toEqual({ [dayKey()]: 2, [monthKey()]: 2 });
  expect(await messageCount(q, u)).toBe(1);
  // A lease of another day and month counts there (the periods it was reserved for), not in today's counters.
  const old = await leaseOf(q, `${u}_old`, 4, { day: 'd:2099-01-01', month: 'm:2099-01' });
  const rows = varied(`${u}_old`);
  await writer.write({ userId: `${u}_old`, rows, recipients: 3, lease: use(old, 3, { day: 5, month: 5 }) });
  expect(await leaseLeft(q, old.id)).toBe(1);
  expect(await countersOf(q, `${u}_old`)).toEqual({ 'd:2099-01-01': 3, 'm:2099-01': 3 });
}

describe('accept writer, lease shape', () => {
  it('moves recipients off the lease, or raises LEASE_LOST and writes nothing (node-pg)', async () => {
    await leaseShape(database.db, createAcceptWriter({ db }), 'pg');
  });

  it('writes a group mixing sends of two leases and sends with none: each lease and counter moved once', async () => {
    const flushes: number[] = [];
    const writer = createAcceptWriter({ db, onFlush: (n) => flushes.push(n) });
    const [la, lb] = [await leaseOf(database.db, 'usr_gl_a', 10), await leaseOf(database.db, 'usr_gl_b', 10)];
    const plugs = Array.from({ length: 4 }, () => writer.write(accept('usr_plug4')));
    const sends = [
      writer.write({ ...accept('usr_gl_a', 2), lease: use(la, 2, { day: 100, month: null }) }),
      writer.write(accept('usr_gl_c', 3)),
      writer.write({ ...accept('usr_gl_b', 1), lease: use(lb, 1, { day: 100, month: null }) }),
      writer.write({ ...accept('usr_gl_a', 3), lease: use(la, 3, { day: 100, month: null }) }),
    ];
    await Promise.all([...plugs, ...sends]);
    expect(flushes).toEqual([1, 1, 1, 1, 4]);
    expect([await leaseLeft(database.db, la.id), await leaseLeft(database.db, lb.id)]).toEqual([5, 9]);
    const today = (n: number) => ({ [dayKey()]: n, [monthKey()]: n });
    expect(await countersOf(database.db, 'usr_gl_a')).toEqual(today(5));
    expect(await countersOf(database.db, 'usr_gl_b')).toEqual(today(1));
    expect(await countersOf(database.db, 'usr_gl_c')).toEqual(today(3));
  });
});

describe('accept writer on PGlite', () => {
  let lite: Database;
  beforeAll(async () => {
    lite = await openDatabase({ dataDir: mkdtempSync(join(tmpdir(), 'svc-accept-writer-lite-')) });
  });
  afterAll(async () => {
    await lite?.close();
  });

  it('writes the three shapes as drizzle would, and raises LEASE_LOST', async () => {
    const writer = createAcceptWriter({ db: lite.db });
    for (const recipients of [0, 3]) {
      const rows = varied('usr_lite');
      await expectAsDrizzle(lite.db, rows, () => writer.write({ userId: 'usr_lite', rows, recipients }));
      const [back] = await lite.db.select().from(schema.messages).where(eq(schema.messages.id, rows[1]!.id!));
      expect(back).toEqual(rows[1]);
    }
    expect(await countersOf(lite.db, 'usr_lite')).toEqual({ [dayKey()]: 3, [monthKey()]: 3 });
    await leaseShape(lite.db, writer, 'lite');
  });
});

describe('arrayInsert', () => {
  it('refuses an array column (unnest would flatten it)', () => {
    const t = pgTable('t_arr', { id: text('id').primaryKey(), tags: text('tags').array() });
    expect(() => arrayInsert(t)).toThrow(/array column/);
  });

  it('fills a row left undefined as drizzle would: the constant default, the default function, or null', () => {
    let calls = 0;
    const t = pgTable('t_def', {
      id: text('id').primaryKey(),
      n: integer('n').notNull().default(7),
      on: boolean('on').notNull().default(true),
      j: jsonb('j').$type<{ a: string }>(),
      f: text('f').$defaultFn(() => `f${++calls}`),
      plain: text('plain'),
      gen: text('gen').generatedAlwaysAs(sql`'x'`),
    });
    const ins = arrayInsert(t);
    const rows = [{ id: 'a', n: 1, on: false, j: { a: '"' } }, { id: 'b' }, { id: 'c', plain: null }];
    const { columns } = ins.columnsOf(rows);
    expect(columns.map((c) => c.column.name)).toEqual(['id', 'n', 'on', 'j', 'f', 'plain']);
    expect(Object.values(ins.values(columns, rows, 'x'))).toEqual([
      ['a', 'b', 'c'],
      [1, 7, 7],
      [false, true, true],
      ['{"a":"\\""}', null, null],
      ['f1', 'f2', 'f3'],
      [null, null, null],
    ]);
    // Left undefined in every row: out of the statement (PostgreSQL's DEFAULT); the default function still runs.
    const none = ins.columnsOf([{ id: 'd' }]);
    expect(none.columns.map((c) => c.column.name)).toEqual(['id', 'j', 'f', 'plain']);
    expect(ins.values(none.columns, [{ id: 'd' }], 'x')).toEqual({ x0: ['d'], x1: [null], x2: ['f4'], x3: [null] });
  });

  it('leaves out an SQL default no row sets, and refuses a group that sets it in some rows only', () => {
    const t = pgTable('t_sql', { id: text('id').primaryKey(), at: text('at').default(sql`now()::text`) });
    const ins = arrayInsert(t);
    expect(ins.columnsOf([{ id: 'a' }]).columns.map((c) => c.column.name)).toEqual(['id']);
    const mixed = [{ id: 'a', at: 'x' }, { id: 'b' }];
    const { columns } = ins.columnsOf(mixed);
    expect(() => ins.values(columns, mixed, 'x')).toThrow(/set in some rows/);
    expect(ins.values(columns, [{ id: 'a', at: 'x' }], 'x')).toEqual({ x0: ['a'], x1: ['x'] });
  });
});
