import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { and, eq, sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, schema, type Database } from '../db/index.js';
import { createAcceptWriter, type AcceptWriter } from '../core/sending/accept-writer.js';
import {
  CAP_LEASE_MAX,
  CAP_LEASE_TTL_MS,
  createCapLeases,
  isLeaseLost,
  type CapLeases,
} from '../core/gate/cap-lease.js';
import { createSendGate } from '../core/gate/gate.js';
import { createUsageService, dayKey, DB_NOW_MS, type LeaseGrant } from '../core/usage.js';
import { newId } from '../core/ids.js';
import type { AppError } from '../core/errors.js';
import { createTestDatabase } from './helpers/pg.js';

/**
 * Leased cap allowance (core/gate/cap-lease.ts) between two lessees on one PostgreSQL: together they never
 * pass the cap and never refuse below it, a lease taken back or expired admits nothing more, and an expired
 * lease is not counted against the cap.
 */
let pg: Awaited<ReturnType<typeof createTestDatabase>>;
let database: Database;

beforeAll(async () => {
  pg = await createTestDatabase();
  database = await openDatabase({ databaseUrl: pg.url, dataDir: mkdtempSync(join(tmpdir(), 'svc-cap-lease-')) });
});
afterAll(async () => {
  await database?.close();
  await pg?.drop();
});

const CAP = 40;
const plans = {
  capped: { includedEmails: null, dailySendCap: CAP, overage: 'metered' as const, paid: false },
  bucket: { includedEmails: 100, dailySendCap: null, overage: 'block' as const, paid: false },
};
const services = () => {
  const db = database.db;
  const usage = createUsageService({ db, plans, defaultPlan: 'capped' });
  return { db, usage, gate: createSendGate({ db, usage }) };
};

function row(userId: string) {
  const now = Date.now();
  return {
    id: newId('msg'),
    userId,
    direction: 'outbound' as const,
    kind: 'user' as const,
    fromAddr: 'a@sender.test',
    toAddrs: ['r@rcpt.test'],
    status: 'queued',
    createdAt: now,
    updatedAt: now,
  };
}

/** One process: its lease book and its writer, taking one-recipient sends the way core/sending/service.ts does. */
function lessee() {
  const { db, gate } = services();
  const book: CapLeases = createCapLeases({ db });
  const writer: AcceptWriter = createAcceptWriter({ db });
  let fromLease = 0;
  async function send(userId: string): Promise<'ok' | 'refused'> {
    const r = row(userId);
    const use = book.take(userId, 1, { day: CAP, month: null });
    if (use) {
      try {
        await writer.write({ userId, rows: [r], recipients: 1, lease: use });
        book.settle(use, 'written');
        fromLease += 1;
        return 'ok';
      } catch (err) {
        const lost = isLeaseLost(err);
        book.settle(use, lost ? 'lost' : 'failed');
        if (!lost) throw err;
      }
    }
    const startedAt = book.now();
    const leasing = book.wants(userId);
    let lease: LeaseGrant | undefined;
    let refusal: AppError | undefined;
    try {
      await db.transaction(async (tx) => {
        if (leasing)
          ({ refusal, lease } = await gate.reserveLeasing(tx, userId, 'capped', 1, {
            holder: book.holder,
            ttlMs: CAP_LEASE_TTL_MS,
            max: CAP_LEASE_MAX,
          }));
        else refusal = await gate.reserve(tx, userId, 'capped', 1);
        if (!refusal) await tx.insert(schema.messages).values(r);
      });
    } finally {
      if (leasing) book.granted(userId, refusal ? undefined : lease, startedAt);
    }
    return refusal ? 'refused' : 'ok';
  }
  return { book, send, fromLease: () => fromLease };
}

const used = async (userId: string) =>
  (
    await database.db
      .select({ count: schema.usageCounters.count })
      .from(schema.usageCounters)
      .where(and(eq(schema.usageCounters.userId, userId), eq(schema.usageCounters.period, dayKey())))
  )[0]?.count ?? 0;
const messages = async (userId: string) =>
  (await database.db.select({ id: schema.messages.id }).from(schema.messages).where(eq(schema.messages.userId, userId)))
    .length;
const leaseRows = (userId: string) =>
  database.db.select().from(schema.capLeases).where(eq(schema.capLeases.userId, userId));

describe('leased cap allowance', () => {
  it('two lessees sending at once accept exactly the cap between them and refuse the rest', async () => {
    const [a, b] = [lessee(), lessee()];
    const userId = 'usr_two_lessees';
    const answers: string[] = [];
    // Waves, so each lessee has reserved once and asks for a lease; then everyone at once.
    for (const wave of [2, 4, 114])
      answers.push(...(await Promise.all(Array.from({ length: wave }, (_, i) => (i % 2 ? b : a).send(userId)))));
    expect(answers.filter((x) => x === 'ok')).toHaveLength(CAP);
    expect(answers.filter((x) => x === 'refused')).toHaveLength(120 - CAP);
    expect(await used(userId)).toBe(CAP);
    expect(await messages(userId)).toBe(CAP);
    // Both took some (the first send of each always fits).
    expect(answers.filter((x, i) => x === 'ok' && i % 2 === 0).length).toBeGreaterThan(0);
    expect(answers.filter((x, i) => x === 'ok' && i % 2 === 1).length).toBeGreaterThan(0);
    await Promise.all([a.book.close(), b.book.close()]);
    // Given back: nothing is left leased, and the usage counters show only what was accepted.
    expect(await leaseRows(userId)).toEqual([]);
    expect(await used(userId)).toBe(CAP);
  });

  it('a lease taken back by a reservation that needs it admits nothing more; its holder reserves instead', async () => {
    const [a, b] = [lessee(), lessee()];
    const userId = 'usr_taken_back';
    expect(await a.send(userId)).toBe('ok');
    expect(await a.send(userId)).toBe('ok'); // asks for and gets a lease
    const [lease] = await leaseRows(userId);
    expect(lease!.amount).toBeGreaterThan(1);
    // The next send comes from the lease: its recipients move from the lease to the counters.
    expect(await a.send(userId)).toBe('ok');
    expect(a.fromLease()).toBe(1);
    expect((await leaseRows(userId))[0]!.amount).toBe(lease!.amount - 1);
    expect(await used(userId)).toBe(3);
    // b needs all the room the counters leave: it takes the lease back.
    for (let i = 0; i < CAP - 3; i++) expect(await b.send(userId)).toBe('ok');
    expect((await leaseRows(userId)).filter((l) => l.id === lease!.id)).toEqual([]);
    // a's lease is gone: its send fails the lease check, then the cap refuses it.
    expect(await a.send(userId)).toBe('refused');
    expect(await used(userId)).toBe(CAP);
    expect(await messages(userId)).toBe(CAP);
    await Promise.all([a.book.close(), b.book.close()]);
  });

  it("a crashed process's lease stops counting once it expires, and admits nothing after", async () => {
    const { db, usage } = services();
    const userId = 'usr_crashed';
    // A process reserves one and leases the room it may: then it is gone (never gives the lease back).
    const grant = await db.transaction((tx) =>
      usage.reserve(tx, userId, 'capped', 1, { lease: { holder: 'crashed', ttlMs: 300, max: CAP } }),
    );
    expect(grant.lease!.amount).toBeGreaterThan(0);
    const writer = createAcceptWriter({ db });
    const { id, day, month } = grant.lease!;
    const use = { id, userId, day, month, n: 1, caps: { day: CAP, month: null } };
    // Until PostgreSQL's clock passes its expiry it holds; after, a send from it is refused and writes nothing.
    const expired = async () =>
      (
        await db
          .select()
          .from(schema.capLeases)
          .where(sql`${schema.capLeases.expiresAt} <= ${DB_NOW_MS}`)
      ).length > 0;
    await expect.poll(expired, { timeout: 10_000, interval: 50 }).toBe(true);
    const r = row(userId);
    const err = await writer.write({ userId, rows: [r], recipients: 1, lease: use }).catch((e: unknown) => e);
    expect(isLeaseLost(err)).toBe(true);
    expect(await messages(userId)).toBe(0);
    // The rest of the day's room is all there: reserving it does not need to take the lease back (its row stays).
    const rest = await db.transaction((tx) => usage.reserve(tx, userId, 'capped', CAP - 1));
    expect(rest).toEqual({ granted: CAP - 1, hit: null, lease: undefined });
    expect(await leaseRows(userId)).toHaveLength(1);
    expect(await used(userId)).toBe(CAP);
  });

  it('a send from a lease is refused once received mail fills the monthly bucket the lease counted on', async () => {
    const { db, usage } = services();
    const userId = 'usr_bucket';
    const grant = await db.transaction((tx) =>
      usage.reserve(tx, userId, 'bucket', 1, { lease: { holder: 'p1', ttlMs: CAP_LEASE_TTL_MS, max: 100 } }),
    );
    expect(grant.lease!.amount).toBeGreaterThan(2);
    const { id, day, month } = grant.lease!;
    const use = () => ({ id, userId, day, month, n: 1, caps: usage.capsFor('bucket') });
    const writer = createAcceptWriter({ db });
    // Inbound mail counts in the bucket with no reservation: 98 of it leaves room for exactly one more send.
    await usage.consume(db, userId, 98, { outbound: false });
    await writer.write({ userId, rows: [row(userId)], recipients: 1, lease: use() });
    const err = await writer
      .write({ userId, rows: [row(userId)], recipients: 1, lease: use() })
      .catch((e: unknown) => e);
    expect(isLeaseLost(err)).toBe(true);
    expect(await messages(userId)).toBe(1); // the reservation above wrote no row of its own
    expect(await usage.usage({ id: userId, plan: 'bucket' })).toMatchObject({ emails: { used: 100, included: 100 } });
  });
});
