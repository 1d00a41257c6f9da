import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schema } from '../db/index.js';
import { createOutboundQueue } from '../core/transport/queue.js';
import { sweepOutboundScheduleId } from '../workflows/ids.js';
import { eventually, startStack, type TestStack } from './helpers/stack.js';
import { connectTemporal } from '../temporal/client.js';

describe('outbound group commit', () => {
  it('flushes up to maxBatch ids per start, and by timer below that', async () => {
    const batches: string[][] = [];
    const q = createOutboundQueue({ startBatch: async (ids) => void batches.push(ids), flushMs: 5, maxBatch: 3 });
    q.enqueue(['a', 'b']);
    q.enqueue(['c', 'd', 'e', 'f', 'g']);
    await q.flush();
    expect(batches).toEqual([['a', 'b', 'c'], ['d', 'e', 'f'], ['g']]);
    q.enqueue(['h']);
    // Below maxBatch, the timer flushes it on its own (no flush() call).
    await eventually(async () => batches.length === 4, 2000, 5);
    expect(batches.at(-1)).toEqual(['h']);
  });

  it('while a start is under way, new ids gather into the next batch (batches grow with load)', async () => {
    const batches: string[][] = [];
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const q = createOutboundQueue({
      startBatch: async (ids) => {
        batches.push(ids);
        if (batches.length === 1) await gate;
      },
      flushMs: 1,
      maxInFlight: 1,
    });
    q.enqueue(['first']);
    await eventually(async () => batches.length === 1, 2000, 1);
    for (const id of ['a', 'b', 'c', 'd']) q.enqueue([id]);
    await new Promise((r) => setTimeout(r, 10));
    expect(batches).toEqual([['first']]);
    release();
    await q.flush();
    expect(batches).toEqual([['first'], ['a', 'b', 'c', 'd']]);
  });

  it('paces partial batches to startsPerSecond (they gather while they wait); a full batch never waits', async () => {
    const batches: string[][] = [];
    // One token, refilled every 10 s: the first id starts at once, later partial batches wait for the next token.
    const q = createOutboundQueue({
      startBatch: async (ids) => void batches.push(ids),
      flushMs: 1,
      maxBatch: 3,
      startsPerSecond: 0.1,
      burst: 1,
    });
    q.enqueue(['a']);
    await eventually(async () => batches.length === 1, 2000, 5);
    q.enqueue(['b']);
    q.enqueue(['c', 'd', 'e', 'f']);
    await eventually(async () => batches.length === 2, 2000, 5);
    expect(batches).toEqual([['a'], ['b', 'c', 'd']]);
    await new Promise((r) => setTimeout(r, 50));
    expect(batches).toHaveLength(2); // e, f wait for a token
    await q.flush();
    expect(batches).toEqual([['a'], ['b', 'c', 'd'], ['e', 'f']]);
  });

  it('a failed start is reported with its ids and does not stop later batches', async () => {
    const failed: string[][] = [];
    const started: string[][] = [];
    let calls = 0;
    const q = createOutboundQueue({
      startBatch: async (ids) => {
        if (calls++ === 0) throw new Error('temporal down');
        started.push(ids);
      },
      onError: (_e, ids) => failed.push(ids),
      maxBatch: 1,
    });
    q.enqueue(['x', 'y']);
    await q.flush();
    expect(failed).toEqual([['x']]);
    expect(started).toEqual([['y']]);
  });
});

describe('outbound sweep', () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startStack();
  });
  afterAll(async () => {
    await stack?.stop();
  });

  it('delivers a message left queued by a crash between commit and workflow start', async () => {
    const db = stack.service.core.db;
    const old = Date.now() - 5 * 60_000;
    await db.insert(schema.messages).values({
      id: 'msg_stranded_by_a_crash_000',
      userId: null,
      direction: 'outbound',
      kind: 'system',
      fromAddr: 'svc <no-reply@localhost>',
      toAddrs: ['someone@example.com'],
      subject: 'left behind',
      text: 'hello',
      status: 'queued',
      createdAt: old,
      updatedAt: old,
    });
    const t = await connectTemporal({
      address: stack.service.temporalAddress,
      namespace: 'default',
      taskQueue: stack.config.temporal.taskQueue,
    });
    await t.client.schedule.getHandle(sweepOutboundScheduleId(stack.config.temporal.taskQueue)).trigger();
    const row = await eventually(async () => {
      const [r] = await db.select().from(schema.messages).where(eq(schema.messages.id, 'msg_stranded_by_a_crash_000'));
      return r?.status === 'sent' ? r : undefined;
      // The trigger is skipped when the minute's own run is under way (overlap SKIP): the next minute's run takes it.
    }, 90_000);
    expect(row.workflowId).toBe('outbound-msg_stranded_by_a_crash_000-sweep');
    const [captured] = await db.select().from(schema.outbox).where(eq(schema.outbox.messageId, row.id));
    expect(captured!.raw).toContain('Subject: left behind');
    await t.connection.close();
  }, 120_000);
});
