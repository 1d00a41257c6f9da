import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { schema, type Db } from '../db/index.js';
import { createMailboxStore, type FileInput } from '../core/mailboxes/store.js';
import { countingDatabase } from './helpers/counting-db.js';
import { eventually } from './helpers/stack.js';
import { waitingForLocks } from './helpers/inbound-stack.js';

/**
 * Filing a new message (core/mailboxes/store.ts) on PostgreSQL: the folder (made or locked), its next UID and
 * the filing are one statement; UIDs stay unique, ascending in the order filings commit, and `uid_next` stays
 * past every UID, also on a folder deleted and made again while the filing ran.
 */
let h: Awaited<ReturnType<typeof countingDatabase>>;
beforeAll(async () => {
  h = await countingDatabase('filing');
  await h.database.db.insert(schema.users).values([
    { id: 'usr_f', email: 'f@example.com', plan: 'free', createdAt: 1, updatedAt: 1 },
    { id: 'usr_g', email: 'g@example.com', plan: 'free', createdAt: 1, updatedAt: 1 },
  ]);
});
afterAll(async () => {
  await h?.close();
});
beforeEach(() => h.reset());

const message = (address: string, n: number): FileInput => ({
  userId: 'usr_f',
  domainId: 'dom_f',
  address,
  folder: 'INBOX',
  raw: Buffer.from(`Subject: ${n}\r\n\r\nhi ${n}`),
  fromAddr: 'a@far.test',
  subject: String(n),
  messageId: `msg_${address}_${n}`,
  fresh: true,
});
const folder = async (db: Db, address: string) =>
  (await db.select().from(schema.mailboxes).where(eq(schema.mailboxes.address, address)))[0]!;

describe('filing a new message', () => {
  it('takes one statement on a folder that exists and on one it creates, uid_next past each UID', async () => {
    const store = createMailboxStore({ db: h.db });
    const first = (await h.db.transaction((tx) => store.fileIn(tx, message('new@f.test', 1))))!;
    // begin, the filing, commit.
    expect(h.counted.statements, h.counted.texts.join('\n')).toBe(3);
    expect((await folder(h.db, 'new@f.test')).uidNext).toBe(first.uid + 1);
    h.reset();
    const second = (await h.db.transaction((tx) => store.fileIn(tx, message('new@f.test', 2))))!;
    expect(h.counted.statements, h.counted.texts.join('\n')).toBe(3);
    expect(second.mailboxId).toBe(first.mailboxId);
    expect(second.uid).toBeGreaterThan(first.uid);
    expect((await folder(h.db, 'new@f.test')).uidNext).toBe(second.uid + 1);
    // A second recipient of the same bytes in the same transaction refers to the body the first stored.
    const [a, b] = await h.db.transaction(async (tx) => {
      const one = (await store.fileIn(tx, message('new@f.test', 3)))!;
      return [one, (await store.fileIn(tx, { ...message('other@f.test', 3), bodyId: one.bodyId }))!];
    });
    expect(b!.bodyId).toBe(a!.bodyId);
    expect((await folder(h.db, 'other@f.test')).uidNext).toBe(b!.uid + 1);
  });

  it('a folder made by ensure() (uid_next 1) gets a UID from the sequence and uid_next past it', async () => {
    const store = createMailboxStore({ db: h.db });
    const box = await store.ensure({ userId: 'usr_f', domainId: 'dom_f', address: 'made@f.test', folder: 'INBOX' });
    expect(box.uidNext).toBe(1);
    const filed = (await h.db.transaction((tx) => store.fileIn(tx, message('made@f.test', 1))))!;
    expect(filed.mailboxId).toBe(box.id);
    expect((await folder(h.db, 'made@f.test')).uidNext).toBe(filed.uid + 1);
  });

  it('a folder deleted while the filing looked for it is made again with uid_next past the UID', async () => {
    const store = createMailboxStore({ db: h.database.db });
    const box = await store.ensure({ userId: 'usr_g', domainId: 'dom_g', address: 'gone@g.test', folder: 'INBOX' });
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    let deleted = false;
    // The delete holds the row: the filing's snapshot still has the folder, its insert waits for the delete.
    const deleter = h.database.db.transaction(async (tx) => {
      await tx.delete(schema.mailboxes).where(eq(schema.mailboxes.id, box.id));
      deleted = true;
      await released;
    });
    await eventually(async () => deleted, 10_000, 10);
    const filing = h.database.db.transaction((tx) =>
      store.fileIn(tx, { ...message('gone@g.test', 1), userId: 'usr_g', domainId: 'dom_g' }),
    );
    await eventually(() => waitingForLocks(h.pool, 1), 10_000, 10);
    release();
    await deleter;
    const filed = (await filing)!;
    expect(filed.mailboxId).not.toBe(box.id);
    expect((await folder(h.db, 'gone@g.test')).uidNext).toBe(filed.uid + 1);
  });

  it('a filing waits for the folder lock another transaction holds, and its UID comes after', async () => {
    const store = createMailboxStore({ db: h.database.db });
    await h.database.db.transaction((tx) => store.fileIn(tx, message('held@f.test', 0)));
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    let heldUid = 0;
    const holder = h.database.db.transaction(async (tx) => {
      heldUid = (await store.fileIn(tx, message('held@f.test', 1)))!.uid;
      await released;
    });
    await eventually(async () => heldUid > 0, 10_000, 10);
    // Another account's filing takes a UID meanwhile (one account's filings also queue for its storage total's
    // row): the waiting filing's UID must come after it too.
    const elsewhere = (await h.database.db.transaction((tx) =>
      store.fileIn(tx, { ...message('else@g.test', 1), userId: 'usr_g', domainId: 'dom_g' }),
    ))!;
    expect(elsewhere.uid).toBeGreaterThan(heldUid);
    let waitingUid = 0;
    const waiting = h.database.db.transaction(async (tx) => {
      waitingUid = (await store.fileIn(tx, message('held@f.test', 2)))!.uid;
    });
    await eventually(() => waitingForLocks(h.pool, 1), 10_000, 10);
    expect(waitingUid).toBe(0);
    release();
    await holder;
    await waiting;
    expect(waitingUid).toBeGreaterThan(elsewhere.uid);
    expect((await folder(h.db, 'held@f.test')).uidNext).toBe(waitingUid + 1);
  });

  it('many filings at once into one folder: distinct UIDs, uid_next past the last', async () => {
    const store = createMailboxStore({ db: h.database.db });
    const uids = await Promise.all(
      Array.from({ length: 24 }, (_, i) =>
        h.database.db.transaction(async (tx) => (await store.fileIn(tx, message('busy@f.test', i)))!.uid),
      ),
    );
    expect(new Set(uids).size).toBe(24);
    const rows = await h.db
      .select({ uid: schema.mailboxMessages.uid })
      .from(schema.mailboxMessages)
      .innerJoin(schema.mailboxes, eq(schema.mailboxes.id, schema.mailboxMessages.mailboxId))
      .where(eq(schema.mailboxes.address, 'busy@f.test'));
    expect(rows.map((r) => r.uid).sort((x, y) => x - y)).toEqual([...uids].sort((x, y) => x - y));
    expect((await folder(h.db, 'busy@f.test')).uidNext).toBe(Math.max(...uids) + 1);
  });
});
