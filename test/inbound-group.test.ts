import pg from 'pg';
import type { Transporter } from 'nodemailer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inboundAcceptsWaiting } from '../core/metrics.js';
import { startInboundStack, waitingForLocks } from './helpers/inbound-stack.js';
import { eventually } from './helpers/stack.js';

/**
 * Inbound messages accepted together share one accepting transaction (core/inbound/service.ts, `accepting`):
 * while one transaction is under way (here held on the account's storage row by the test), the messages that
 * arrive wait and then commit together, one begin and one commit. A group with a message stored before rolls back
 * and each of its messages is accepted alone, each answered as it would be alone.
 */
const SERVICE = 'grp.svc.test';
const DOMAIN = `inbox.${SERVICE}`;
let inbound: Awaited<ReturnType<typeof startInboundStack>>;
let userId: string;
let probe: pg.Client;

/**
 * Accepting transactions while `counting`: those of this process's pg clients that ran the door's accepting
 * statement (other work of the process, a sweep's transaction, is not counted).
 */
let counting = false;
const accepting = new Set<string>();
const begun = new WeakMap<pg.Client, { client: number; tx: number }>();
let clients = 0;
const query = pg.Client.prototype.query;

beforeAll(async () => {
  pg.Client.prototype.query = function (this: pg.Client, ...args: any[]) {
    const q = args[0] as string | { text?: string; name?: string };
    const text = typeof q === 'string' ? q : q.text;
    const seen = begun.get(this) ?? { client: ++clients, tx: 0 };
    begun.set(this, seen);
    if (text === 'begin') seen.tx += 1;
    if (counting && typeof q !== 'string' && q.name?.startsWith('inbound_admit'))
      accepting.add(`${seen.client}:${seen.tx}`);
    return (query as any).apply(this, args);
  } as typeof query;
  inbound = await startInboundStack(SERVICE, 'group');
  userId = inbound.userId;
  probe = inbound.probe;
});
afterAll(async () => {
  pg.Client.prototype.query = query;
  await inbound?.stop();
});

const smtp = (n: number) => inbound.smtp(n);
/** The same bytes every time for one `n`: a second copy is a message stored before. */
const raw = (n: number) =>
  `From: s${n}@far.example\r\nTo: in${n}@${DOMAIN}\r\nSubject: group ${n}\r\nMessage-ID: <g${n}@far.example>\r\n\r\nhello ${n}\r\n`;
const send = (t: Transporter, n: number) =>
  t
    .sendMail({ envelope: { from: `s${n}@far.example`, to: [`in${n}@${DOMAIN}`] }, raw: raw(n) })
    .then((info) => /queued as (msg_[\w-]+)/.exec(String(info.response))![1]!);

/** Holds the account's storage row until `release`: the accepting transaction under way waits on it. */
async function holdStorageRow(): Promise<() => Promise<void>> {
  await probe.query('begin');
  await probe.query('select 1 from storage_usage where user_id = $1 for update', [userId]);
  return async () => {
    await probe.query('commit');
  };
}

/** svc_inbound_accepts_waiting: messages waiting for the transaction under way. */
const waiting = async () => (await inboundAcceptsWaiting.get()).values[0]?.value;
/** The first message's transaction waits for the row the test holds. */
const waitsOnTheRow = () => waitingForLocks(probe, 1);

describe('accepting transactions shared by messages that arrive together', () => {
  it('messages arriving while one transaction is under way commit together', async () => {
    const t = smtp(8);
    try {
      await send(t, 0); // the account's storage row exists from here on
      const release = await holdStorageRow();
      accepting.clear();
      counting = true;
      const first = send(t, 1);
      await eventually(waitsOnTheRow, 15_000, 10);
      const others = [2, 3, 4, 5, 6].map((n) => send(t, n));
      await eventually(async () => (await waiting()) === 5, 15_000, 10);
      await release();
      const ids = await Promise.all([first, ...others]);
      counting = false;
      // The first message's transaction, then one for the five that waited.
      expect(accepting.size).toBe(2);
      const { rows } = await probe.query('select id from messages where id = any($1)', [ids]);
      expect(rows).toHaveLength(6);
    } finally {
      counting = false;
      t.close();
    }
  });

  it('a group with a message stored before is accepted again one by one, each answered as alone', async () => {
    const t = smtp(8);
    try {
      const before = await send(t, 10);
      const release = await holdStorageRow();
      accepting.clear();
      counting = true;
      const first = send(t, 11);
      await eventually(waitsOnTheRow, 15_000, 10);
      // Message 10 again (the same bytes and recipient: a retried DATA) among three new ones.
      const others = [12, 10, 13, 14].map((n) => send(t, n));
      await eventually(async () => (await waiting()) === 4, 15_000, 10);
      await release();
      const ids = await Promise.all([first, ...others]);
      counting = false;
      expect(ids[2]).toBe(before);
      // The first, the group that rolled back, then each of its four alone.
      expect(accepting.size).toBe(6);
      // Five messages, each stored and filed once.
      const { rows } = await probe.query('select id from messages where id = any($1)', [ids]);
      expect(rows).toHaveLength(5);
      const { rows: filed } = await probe.query(
        `select count(*)::int as n from mailbox_messages m join mailboxes b on b.id = m.mailbox_id
          where b.address = any($1)`,
        [[10, 11, 12, 13, 14].map((n) => `in${n}@${DOMAIN}`)],
      );
      expect((filed[0] as { n: number }).n).toBe(5);
    } finally {
      counting = false;
      t.close();
    }
  });
});
