import { eq, inArray } from 'drizzle-orm';
import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { schema, type Database, type Db } from '../db/index.js';
import { createAttemptWriter, type AttemptRecord } from '../core/webhooks/attempt-writer.js';
import type { AttemptCapture } from '../core/webhooks/post.js';
import { newId } from '../core/ids.js';
import { retryTransient } from '../core/retry.js';
import { countingDatabase } from './helpers/counting-db.js';

/**
 * Group commit of webhook attempt records (core/webhooks/attempt-writer.ts) against PostgreSQL: an attempt is
 * written at once when nothing is under way, attempts ready meanwhile share one statement, every caller
 * resolves only once its att_ row and its delivery are committed, and a failed statement fails no caller
 * whose own record could be written.
 */
let t: Awaited<ReturnType<typeof countingDatabase>>;
let database: Database;
let probe: pg.Client;
/** A handle that counts its statements (`t.counted`): the writers under test get this one. */
let db: Db;

beforeAll(async () => {
  t = await countingDatabase('attempt-writer');
  ({ database, db } = t);
  probe = new pg.Client({ connectionString: t.url });
  await probe.connect();
});
afterAll(async () => {
  await probe?.end();
  await t?.close();
});
beforeEach(() => t.reset());

/** Delivery rows, pending, as the worker makes them before their first attempt. */
async function deliveries(count: number): Promise<string[]> {
  const now = Date.now();
  const ids = Array.from({ length: count }, () => newId('dlv'));
  await database.db.insert(schema.deliveries).values(
    ids.map((id) => ({
      id,
      userId: 'usr_attempts',
      messageId: `msg_${id}`,
      routeId: 'rte_attempts',
      domainId: null,
      url: 'https://hooks.example/in',
      kind: 'inbound' as const,
      status: 'pending' as const,
      createdAt: now,
      updatedAt: now,
    })),
  );
  return ids;
}

function capture(ok: boolean): AttemptCapture {
  return {
    ok,
    reason: ok ? null : 'http_5xx',
    status: ok ? 200 : 503,
    requestHeaders: 'content-type: application/json',
    requestBody: '{"event":"email.received","quote":"\\"a\\" \\\\ {b}"}',
    responseHeaders: null,
    responseBody: ok ? '{"status":"ok"}' : 'busy',
    durationMs: 12,
    requestedAt: Date.now(),
  };
}

const rec = (deliveryId: string, n = 1, ok = true, nextDelayMs: number | null = 60_000): AttemptRecord => ({
  deliveryId,
  messageId: `msg_${deliveryId}`,
  n,
  c: capture(ok),
  url: 'https://hooks.example/in',
  nextDelayMs,
});

/** Read on a connection of its own: what is committed. */
async function attemptsOf(deliveryId: string): Promise<{ attempt_number: number; ok: number; request_body: string }[]> {
  const r = await probe.query(
    'select attempt_number, ok, request_body from delivery_attempts where delivery_id = $1 order by attempt_number',
    [deliveryId],
  );
  return r.rows;
}
async function deliveryOf(id: string) {
  const r = await probe.query(
    'select status, attempts, last_status_code, last_reason, next_retry_at, retry_attempts from deliveries where id = $1',
    [id],
  );
  return r.rows[0] as {
    status: string;
    attempts: number;
    last_status_code: number | null;
    last_reason: string | null;
    next_retry_at: string | null;
    retry_attempts: number;
  };
}

describe('attempt writer (group commit)', () => {
  it('writes an attempt at once when no write is under way: one statement, durable when it resolves', async () => {
    const flushes: number[] = [];
    const writer = createAttemptWriter({ db, onFlush: (n) => flushes.push(n) });
    const [id] = await deliveries(1);
    const done = writer.write(rec(id!));
    // The statement left before write() returned: no timer, no batching delay.
    expect(flushes).toEqual([1]);
    expect(await done).toEqual({ health: null });
    expect(t.counted.statements).toBe(1);
    expect(await attemptsOf(id!)).toEqual([{ attempt_number: 1, ok: 1, request_body: rec(id!).c.requestBody }]);
    expect(await deliveryOf(id!)).toMatchObject({ status: 'delivered', attempts: 1, last_status_code: 200 });
  });

  it('commits concurrent attempts in fewer statements than attempts, each durable when its caller resolves', async () => {
    const flushes: number[] = [];
    const writer = createAttemptWriter({ db, onFlush: (n) => flushes.push(n) });
    const ids = await deliveries(40);
    t.reset();
    const seen = await Promise.all(
      ids.map((id, i) =>
        writer
          .write(rec(id, 1, i % 2 === 0, i % 4 === 1 ? null : 60_000))
          // Read as soon as this caller resumes, on another connection: its rows are committed already.
          .then(async () => ({ attempts: await attemptsOf(id), delivery: await deliveryOf(id) })),
      ),
    );
    expect(flushes).toEqual([1, 39]);
    expect(t.counted.statements).toBe(2);
    seen.forEach(({ attempts, delivery }, i) => {
      const ok = i % 2 === 0;
      expect(attempts).toEqual([{ attempt_number: 1, ok: ok ? 1 : 0, request_body: capture(ok).requestBody }]);
      if (ok) expect(delivery).toMatchObject({ status: 'delivered', attempts: 1, next_retry_at: null });
      else if (i % 4 === 1)
        expect(delivery).toMatchObject({
          status: 'failed',
          last_reason: 'http_5xx',
          next_retry_at: null,
          retry_attempts: 0,
        });
      else {
        expect(delivery).toMatchObject({ status: 'pending', last_status_code: 503, retry_attempts: 1 });
        expect(Number(delivery.next_retry_at)).toBeGreaterThan(Date.now());
      }
    });
  });

  it("keeps one delivery's attempts in separate statements, in order, and is safe to write twice", async () => {
    const flushes: number[] = [];
    const writer = createAttemptWriter({ db, onFlush: (n) => flushes.push(n) });
    const [plug, id] = await deliveries(2);
    await Promise.all([
      writer.write(rec(plug!)),
      writer.write(rec(id!, 1, false)),
      writer.write(rec(id!, 2, false)),
      writer.write(rec(id!, 2, false)),
    ]);
    expect(flushes).toEqual([1, 1, 1, 1]);
    expect((await attemptsOf(id!)).map((a) => a.attempt_number)).toEqual([1, 2]);
    expect(await deliveryOf(id!)).toMatchObject({ status: 'pending', attempts: 2, retry_attempts: 2 });
  });

  it('fails only the caller whose own record cannot be written; the rest of its group is written', async () => {
    const writer = createAttemptWriter({ db });
    const ids = await deliveries(6);
    // An attempt number out of the column's range: the group's statement fails, and so does this one alone.
    const bad = { ...rec(ids[3]!), n: 3_000_000_000 };
    const results = await Promise.allSettled(ids.map((id, i) => writer.write(i === 3 ? bad : rec(id))));
    expect(results.map((r) => r.status)).toEqual([
      'fulfilled',
      'fulfilled',
      'fulfilled',
      'rejected',
      'fulfilled',
      'fulfilled',
    ]);
    for (const [i, id] of ids.entries()) expect((await attemptsOf(id)).length).toBe(i === 3 ? 0 : 1);
    expect(await deliveryOf(ids[3]!)).toMatchObject({ status: 'pending', attempts: 0 });
  });

  it('rejects every caller of a group that lost its connection, writes nothing for them, and each retry lands', async () => {
    const flushes: number[] = [];
    let failures = 0;
    // The database answers the group's statement with a lost connection, once.
    const flaky = {
      execute: (q: Parameters<Db['execute']>[0]) => {
        if (flushes.length === 2 && failures === 0) {
          failures += 1;
          return Promise.reject(Object.assign(new Error('terminating connection'), { code: '57P01' }));
        }
        return db.execute(q);
      },
    } as unknown as Db;
    const writer = createAttemptWriter({ db: flaky, onFlush: (n) => flushes.push(n) });
    const ids = await deliveries(5);
    const tries = new Map<string, number>();
    const rejected: string[] = [];
    await Promise.all(
      ids.map((id) =>
        retryTransient(() => {
          tries.set(id, (tries.get(id) ?? 0) + 1);
          return writer.write(rec(id)).catch(async (err: unknown) => {
            // Rejected: nothing of this attempt is written.
            expect(await attemptsOf(id)).toEqual([]);
            rejected.push(id);
            throw err;
          });
        }),
      ),
    );
    expect(failures).toBe(1);
    expect(rejected.sort()).toEqual(ids.slice(1).sort());
    expect(flushes.slice(0, 2)).toEqual([1, 4]);
    for (const id of ids) {
      expect(await attemptsOf(id)).toHaveLength(1);
      expect(tries.get(id)).toBe(id === ids[0] ? 1 : 2);
    }
    const rows = await database.db
      .select({ status: schema.deliveries.status })
      .from(schema.deliveries)
      .where(inArray(schema.deliveries.id, ids));
    expect(rows.every((r) => r.status === 'delivered')).toBe(true);
  });

  it('reads the domain health back with each delivery moved on', async () => {
    const writer = createAttemptWriter({ db });
    const [id] = await deliveries(1);
    const health = { status: 'ok', code: 200, at: 1, consecutiveFailures: 0 };
    await probe.query(
      `insert into domains (id, user_id, domain, status, provider, dkim_selector, dkim_public_key,
         dkim_private_key_sealed, mx_token, webhook_health, created_at, updated_at)
       values ('dom_attw', 'usr_attempts', 'attw.example', 'pending', 'manual', 's1', 'pk', 'sealed', 'mxattw', $1, 0, 0) on conflict do nothing`,
      [JSON.stringify(health)],
    );
    await database.db.update(schema.deliveries).set({ domainId: 'dom_attw' }).where(eq(schema.deliveries.id, id!));
    expect(await writer.write(rec(id!))).toEqual({ health });
  });
});
