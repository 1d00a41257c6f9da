import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { eq, sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, schema, type Database } from '../db/index.js';
import { createMailboxStore } from '../core/mailboxes/store.js';
import { createInboundDoor } from '../core/inbound/door.js';
import { createStorageQuota } from '../core/storage/quota.js';
import { createOutcomeWriter } from '../core/outbound/outcome-writer.js';
import { createEventService } from '../core/message-events.js';

/**
 * The named statements of the hot paths (core/prepared.ts) on the embedded database `npm start` runs without
 * DATABASE_URL: filing into a mailbox, the inbound door's accepting statement (both inside a transaction) and
 * the outcome writer run there as on PostgreSQL.
 */
let database: Database;
beforeAll(async () => {
  database = await openDatabase({ dataDir: mkdtempSync(join(tmpdir(), 'svc-prepared-')) });
  expect(database.kind).toBe('pglite');
  await database.db
    .insert(schema.users)
    .values({ id: 'usr_p', email: 'p@example.com', plan: 'free', createdAt: 1, updatedAt: 1 });
});
afterAll(async () => {
  await database?.close();
});

describe('named statements on PGlite', () => {
  it('files messages with ascending UIDs, sharing a body within a transaction', async () => {
    const store = createMailboxStore({ db: database.db });
    const file = (subject: string) =>
      store.file({
        userId: 'usr_p',
        domainId: 'dom_p',
        address: 'In@p.test',
        folder: 'INBOX',
        raw: Buffer.from(`Subject: ${subject}\r\n\r\nhi`),
        fromAddr: 'a@far.test',
        subject,
        flags: ['\\Seen'],
      });
    const first = (await file('one'))!;
    const second = (await file('two'))!;
    expect(second.mailboxId).toBe(first.mailboxId);
    expect(second.uid).toBeGreaterThan(first.uid);
    const shared = await database.db.transaction(async (tx) => {
      const a = (await store.fileIn(tx, {
        userId: 'usr_p',
        domainId: 'dom_p',
        address: 'in@p.test',
        folder: 'INBOX',
        raw: Buffer.from('x'),
        fromAddr: 'a@far.test',
        subject: 's',
      }))!;
      const b = (await store.fileIn(tx, {
        userId: 'usr_p',
        domainId: 'dom_p',
        address: 'other@p.test',
        folder: 'INBOX',
        raw: Buffer.from('x'),
        fromAddr: 'a@far.test',
        subject: 's',
        bodyId: a.bodyId,
      }))!;
      return [a, b];
    });
    expect(shared[1]!.bodyId).toBe(shared[0]!.bodyId);
    const [box] = await database.db.select().from(schema.mailboxes).where(eq(schema.mailboxes.id, first.mailboxId));
    expect(box!.uidNext).toBeGreaterThan(shared[0]!.uid);
    const rows = await database.db
      .select()
      .from(schema.mailboxMessages)
      .where(eq(schema.mailboxMessages.mailboxId, first.mailboxId));
    expect(rows.map((r) => r.flags)).toContainEqual(['\\Seen']);
  });

  it("admits an inbound message through the door's statement and records an outcome", async () => {
    const door = createInboundDoor({
      db: database.db,
      storage: createStorageQuota({ db: database.db, quotaBytes: 1_000_000 }),
      unverifiedDaily: { messages: 10, bytes: 100_000 },
    });
    const now = Date.now();
    const admit = (id: string) =>
      database.db.transaction((tx) =>
        door.atData(tx, 'usr_p', 'in@p.test', 100, true, 0, {
          message: {
            id,
            userId: 'usr_p',
            direction: 'inbound',
            kind: 'user',
            fromAddr: 'a@far.test',
            toAddrs: ['in@p.test'],
            status: 'received',
            spam: null,
            createdAt: now,
            updatedAt: now,
          },
          raw: { messageId: id, content: Buffer.from('raw'), encrypted: false, createdAt: now },
        }),
      );
    expect(await admit('msg_p1')).toEqual({ stored: true });
    expect(await admit('msg_p1')).toEqual({ stored: false }); // the same message again: stored before
    const [daily] = await database.db.select().from(schema.inboundDaily);
    // Counted twice here: the ingress rolls a message stored before back with its transaction.
    expect(daily).toMatchObject({ userId: 'usr_p', messages: 2, bytes: 200 });
    const [msg] = await database.db.select().from(schema.messages).where(eq(schema.messages.id, 'msg_p1'));
    expect(msg).toMatchObject({ status: 'received', spam: null });
    // A null jsonb value is SQL NULL, as drizzle writes it, not the JSON null.
    const nulls = await database.db.execute(
      sql`select count(*)::int as n from messages where id = 'msg_p1' and spam is null`,
    );
    expect((nulls as unknown as { rows: { n: number }[] }).rows[0]!.n).toBe(1);

    const writer = createOutcomeWriter({ db: database.db, events: createEventService({ db: database.db }) });
    await writer.write({
      id: 'msg_p1',
      changed: {},
      entry: { at: now, workflowId: 'wf', to: [], status: 'sent', response: 'ok' },
      events: [{ userId: 'usr_p', messageId: 'msg_p1', type: 'email.sent', data: {} }],
      final: { status: 'sent', nextAttemptAt: null, lastError: null, smtpMessageId: null, sentAny: true },
    });
    const evs = await database.db.select().from(schema.events).where(eq(schema.events.messageId, 'msg_p1'));
    expect(evs.map((e) => e.type)).toEqual(['email.sent']);
  });
});
