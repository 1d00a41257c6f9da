import { eq, inArray } from 'drizzle-orm';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { schema } from '../db/index.js';
import { createOutcomeWriter, type Outcome } from '../core/outbound/outcome-writer.js';
import { createEventService } from '../core/message-events.js';
import { newId } from '../core/ids.js';
import { countingDatabase, domainRow } from './helpers/counting-db.js';

/**
 * Group commit of delivery outcomes (core/outbound/outcome-writer.ts) against PostgreSQL: each outcome moves its
 * message row and inserts its events in one statement shared with the outcomes ready at the same time; an
 * event is routed to a webhook exactly as a single event is (a tracking route; a catch-all webhook route of
 * a domain that opted in to its type), and the dispatcher of a routed domain is woken.
 */
let t: Awaited<ReturnType<typeof countingDatabase>>;
const nudged: string[] = [];

beforeAll(async () => {
  t = await countingDatabase('outcome-writer');
  const db = t.database.db;
  const route = (id: string, domainId: string, pattern: string) => ({
    id,
    userId: 'usr_o',
    domainId,
    pattern,
    url: 'https://hooks.example/in',
    action: 'webhook' as const,
    secretSealed: 's',
    createdAt: 1,
    updatedAt: 1,
  });
  // dom_track: a tracking route (every engagement type); dom_all / dom_some: a catch-all webhook route, opted in
  // to all types / to bounces only; dom_none: no route.
  for (const [id, events] of [
    ['dom_track', null],
    ['dom_all', '"all"'],
    ['dom_some', '["email.bounced"]'],
    ['dom_none', '"all"'],
  ] as const)
    await db.insert(schema.domains).values(domainRow(id, 'usr_o', `${id}.test`, { webhookEvents: events }));
  await db
    .insert(schema.routes)
    .values([
      route('rte_t', 'dom_track', '@tracking'),
      route('rte_a', 'dom_all', '*'),
      route('rte_s', 'dom_some', '*'),
    ]);
});
afterAll(async () => {
  await t?.close();
});
beforeEach(() => {
  t.reset();
  nudged.length = 0;
});

async function message(domainId: string): Promise<string> {
  const id = newId('msg');
  await t.database.db.insert(schema.messages).values({
    id,
    userId: 'usr_o',
    direction: 'outbound',
    kind: 'user',
    domainId,
    fromAddr: `a@${domainId}.test`,
    toAddrs: ['x@rcpt.test', 'y@rcpt.test'],
    status: 'queued',
    createdAt: 1,
    updatedAt: 1,
  });
  return id;
}

function writer() {
  const events = createEventService({ db: t.db });
  events.attachRouter({ nudge: (domainId) => void nudged.push(domainId) });
  return createOutcomeWriter({ db: t.db, events });
}

function sent(id: string, domainId: string): Outcome {
  return {
    id,
    changed: { 'x@rcpt.test': { status: 'sent', at: 5 }, 'y@rcpt.test': { status: 'bounced', at: 5 } } as never,
    entry: { at: 5, workflowId: 'wf', to: ['x@rcpt.test', 'y@rcpt.test'], status: 'sent', response: '250 ok' },
    events: [
      { userId: 'usr_o', messageId: id, domainId, type: 'email.sent', data: { to: ['x@rcpt.test'] } },
      { userId: 'usr_o', messageId: id, domainId, type: 'email.bounced', recipient: 'y@rcpt.test', data: { n: 1 } },
    ],
    final: { status: 'sent', nextAttemptAt: null, lastError: null, smtpMessageId: '<m@x>', sentAny: true },
  };
}

describe('outcome writer', () => {
  it('moves the message and inserts its events in one statement, routing each event as the domain asks', async () => {
    const w = writer();
    const domains = ['dom_track', 'dom_all', 'dom_some', 'dom_none'];
    const ids: string[] = [];
    for (const d of domains) {
      const id = await message(d);
      ids.push(id);
      t.reset();
      await w.write(sent(id, d));
      expect(t.counted.statements).toBe(1);
    }
    const rows = await t.database.db.select().from(schema.messages).where(inArray(schema.messages.id, ids));
    for (const r of rows) {
      expect(r).toMatchObject({ status: 'sent', attempts: 1, smtpMessageId: '<m@x>', lastError: null });
      expect(r.sentAt).toBeGreaterThan(0);
      expect(r.recipients).toMatchObject({ 'x@rcpt.test': { status: 'sent' }, 'y@rcpt.test': { status: 'bounced' } });
      expect(r.trail).toEqual([expect.objectContaining({ status: 'sent', response: '250 ok' })]);
    }
    const evs = await t.database.db.select().from(schema.events).where(inArray(schema.events.messageId, ids));
    const state = (d: string, type: string) => {
      const id = ids[domains.indexOf(d)]!;
      const found = evs.filter((e) => e.messageId === id && e.type === type);
      expect(found).toHaveLength(1);
      return found[0]!.webhookState;
    };
    expect([state('dom_track', 'email.sent'), state('dom_track', 'email.bounced')]).toEqual(['pending', 'pending']);
    expect([state('dom_all', 'email.sent'), state('dom_all', 'email.bounced')]).toEqual(['pending', 'pending']);
    expect([state('dom_some', 'email.sent'), state('dom_some', 'email.bounced')]).toEqual([null, 'pending']);
    expect([state('dom_none', 'email.sent'), state('dom_none', 'email.bounced')]).toEqual([null, null]);
    expect(evs.find((e) => e.type === 'email.bounced')).toMatchObject({ recipient: 'y@rcpt.test', data: { n: 1 } });
    expect(new Set(nudged)).toEqual(new Set(['dom_track', 'dom_all', 'dom_some']));
  });

  it('outcomes ready together share a statement; one without events and one not final write as they should', async () => {
    const w = writer();
    const ids = await Promise.all(Array.from({ length: 30 }, () => message('dom_none')));
    t.reset();
    await Promise.all(
      ids.map((id, i) =>
        w.write(
          i % 2
            ? sent(id, 'dom_none')
            : {
                id,
                changed: { 'x@rcpt.test': { status: 'deferred', at: 6 } } as never,
                entry: { at: 6, workflowId: 'wf', to: ['x@rcpt.test'], status: 'deferred', response: '451 later' },
                events: [],
              },
        ),
      ),
    );
    expect(t.counted.statements).toBeLessThan(30);
    expect(new Set(t.counted.texts).size).toBe(1);
    const [notFinal] = await t.database.db.select().from(schema.messages).where(eq(schema.messages.id, ids[0]!));
    expect(notFinal).toMatchObject({ status: 'queued', attempts: 0, sentAt: null });
    expect(notFinal!.trail).toEqual([expect.objectContaining({ status: 'deferred', response: '451 later' })]);
    const evs = await t.database.db.select().from(schema.events).where(inArray(schema.events.messageId, ids));
    expect(evs).toHaveLength(30); // two for each of the 15 final ones
  });
});
