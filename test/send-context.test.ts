import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { schema } from '../db/index.js';
import { createSendContextReader } from '../core/sending/context.js';
import { countingDatabase, domainRow } from './helpers/counting-db.js';

/**
 * The send gates' read (core/sending/context.ts) against PostgreSQL: sends of one account and domain that arrive
 * while reads are under way share one statement, and each gets its own recipients' suppressions, nobody else's.
 */
let t: Awaited<ReturnType<typeof countingDatabase>>;

beforeAll(async () => {
  t = await countingDatabase('send-context');
  const db = t.database.db;
  for (const id of ['usr_a', 'usr_b'])
    await db.insert(schema.users).values({ id, email: `${id}@example.com`, plan: 'free', createdAt: 1, updatedAt: 1 });
  for (const [id, userId, domain] of [
    ['dom_a', 'usr_a', 'a.test'],
    ['dom_b', 'usr_b', 'b.test'],
  ] as const)
    await db.insert(schema.domains).values(domainRow(id, userId, domain));
  // usr_a suppresses even-numbered recipients; usr_b suppresses r1 only.
  for (let i = 0; i < 40; i += 2)
    await db
      .insert(schema.suppressions)
      .values({ id: `sup_a${i}`, userId: 'usr_a', email: `r${i}@rcpt.test`, reason: 'manual', createdAt: 1 });
  await db
    .insert(schema.suppressions)
    .values({ id: 'sup_b1', userId: 'usr_b', email: 'r1@rcpt.test', reason: 'manual', createdAt: 1 });
});
afterAll(async () => {
  await t?.close();
});
beforeEach(() => t.reset());

describe('send context reads', () => {
  it('a send alone reads at once; concurrent sends of one account and domain share reads, each with its own suppressions', async () => {
    const reader = createSendContextReader(t.db);
    const alone = await reader.load({ userId: 'usr_a', domain: 'a.test', emails: ['r2@rcpt.test', 'r3@rcpt.test'] });
    expect(alone?.domain?.id).toBe('dom_a');
    expect([...alone!.suppressed]).toEqual(['r2@rcpt.test']);
    expect(t.counted.statements).toBe(1);

    t.reset();
    const queries = Array.from({ length: 40 }, (_, i) => ({
      userId: i % 4 === 3 ? 'usr_b' : 'usr_a',
      domain: i % 4 === 3 ? 'b.test' : 'a.test',
      emails: [`r${i}@rcpt.test`, `r${i + 1}@rcpt.test`],
    }));
    const got = await Promise.all(queries.map((q) => reader.load(q)));
    // Four reads go out at once; the sends behind them wait and go two groups (one per account) at a time.
    expect(t.counted.statements).toBeLessThanOrEqual(8);
    got.forEach((ctx, i) => {
      const q = queries[i]!;
      expect(ctx?.domain?.userId).toBe(q.userId);
      const own = q.emails.filter((e) =>
        q.userId === 'usr_a' ? Number(e.slice(1, e.indexOf('@'))) % 2 === 0 : e === 'r1@rcpt.test',
      );
      expect([...ctx!.suppressed].sort()).toEqual(own.sort());
    });
  });

  it('an unknown account reads as nothing, an unknown domain as no domain; a suppression added is seen by the next read', async () => {
    const reader = createSendContextReader(t.db);
    const [nobody, noDomain] = await Promise.all([
      reader.load({ userId: 'usr_none', domain: 'a.test', emails: [] }),
      reader.load({ userId: 'usr_b', domain: 'a.test', emails: ['r1@rcpt.test'] }),
    ]);
    expect(nobody).toBeUndefined();
    expect(noDomain?.domain?.id ?? null).toBeNull();
    expect([...noDomain!.suppressed]).toEqual(['r1@rcpt.test']);
    await t.database.db
      .insert(schema.suppressions)
      .values({ id: 'sup_b9', userId: 'usr_b', email: 'r9@rcpt.test', reason: 'manual', createdAt: 2 });
    const after = await reader.load({ userId: 'usr_b', domain: 'b.test', emails: ['r9@rcpt.test'] });
    expect([...after!.suppressed]).toEqual(['r9@rcpt.test']);
  });
});
