import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { schema } from '../db/index.js';
import { connectTemporal, type TemporalHandle } from '../temporal/client.js';
import { newId } from '../core/ids.js';
import { scheduledSendWorkflowId } from '../workflows/ids.js';
import { cancelSignal } from '../workflows/scheduled-send.js';
import { sweepOutboundWorkflow } from '../workflows/sweep-outbound.js';
import { startWorker } from '../worker.js';
import { startSendingStack, type SendingStack } from './helpers/sending.js';
import { eventually } from './helpers/stack.js';

let env: SendingStack;
let t: TemporalHandle;
beforeAll(async () => {
  env = await startSendingStack();
  t = await connectTemporal({
    address: env.stack.service.temporalAddress,
    namespace: 'default',
    taskQueue: env.stack.config.temporal.taskQueue,
  });
});
afterAll(async () => {
  await t?.connection.close();
  await env?.stop();
});

const to = (addr: string) => (r: { to: string[] }) => r.to.includes(addr);
const row = async (id: string) =>
  (await env.stack.service.core.db.select().from(schema.scheduledSends).where(eq(schema.scheduledSends.id, id)))[0]!;
const handle = (id: string) => t.client.workflow.getHandle(scheduledSendWorkflowId(id));
const sweep = (graceMs: number) =>
  t.client.workflow.execute(sweepOutboundWorkflow, {
    taskQueue: t.taskQueue,
    workflowId: `test-sweep-${Math.random().toString(36).slice(2)}`,
    args: [{ retrySchedule: [500], graceMs }],
  });

describe('scheduled sends: operators and failures', () => {
  it('a cancelSignal (what the Temporal UI sends) cancels before the time, and the row says so', async () => {
    const res = await env.send({ to: 'signal@rcpt.test', scheduledAt: Date.now() + 60_000 });
    await handle(res.body.id).signal(cancelSignal);
    await handle(res.body.id).result();
    expect((await row(res.body.id)).status).toBe('canceled');
  });

  it('a cancellation request from the UI cancels too', async () => {
    const res = await env.send({ to: 'request@rcpt.test', scheduledAt: Date.now() + 60_000 });
    await eventually(async () => (await row(res.body.id)).started);
    await handle(res.body.id).cancel();
    await eventually(async () => (await row(res.body.id)).status === 'canceled');
  });

  it('a terminated run is written canceled: by the API cancel, and by the sweep', async () => {
    const a = await env.send({ to: 'term-a@rcpt.test', scheduledAt: Date.now() + 60_000 });
    await handle(a.body.id).terminate('operator');
    expect((await env.stack.api('DELETE', `/v1/scheduled/${a.body.id}`, { token: env.key })).body).toEqual({
      ok: true,
      id: a.body.id,
      status: 'canceled',
    });
    const b = await env.send({ to: 'term-b@rcpt.test', scheduledAt: Date.now() + 2500 });
    await handle(b.body.id).terminate('operator');
    await new Promise((r) => setTimeout(r, 2700)); // let its time pass: only overdue rows are checked
    await sweep(0);
    expect((await row(b.body.id)).status).toBe('canceled');
  });

  it('a scheduled send a crash left unstarted is started by the sweep and sends on time', async () => {
    const db = env.stack.service.core.db;
    const [user] = await db.select().from(schema.users).where(eq(schema.users.email, 'sender@example.com'));
    const [dom] = await db.select().from(schema.domains).where(eq(schema.domains.userId, user!.id));
    const msgId = newId('msg');
    const id = newId('ssnd');
    const now = Date.now();
    await db.insert(schema.messages).values({
      id: msgId,
      userId: user!.id,
      direction: 'outbound',
      kind: 'user',
      domainId: dom!.id,
      fromAddr: `hello@${dom!.domain}`,
      toAddrs: ['stranded@rcpt.test'],
      subject: 's',
      text: 't',
      status: 'scheduled',
      createdAt: now,
      updatedAt: now,
    });
    await db.insert(schema.scheduledSends).values({
      id,
      userId: user!.id,
      messageId: msgId,
      scheduledAt: now + 1500,
      status: 'scheduled',
      createdAt: now - 120_000,
      updatedAt: now,
    });
    await sweep(60_000);
    expect((await row(id)).started).toBe(true);
    await env.sink.waitFor(to('stranded@rcpt.test'));
    await eventually(async () => (await row(id)).status === 'sent');
  });

  it('with no worker polling, a cancel answers 503 within seconds; once a worker is back the cancel applies', async () => {
    const service = env.stack.service;
    const res = await env.send({ to: 'no-worker@rcpt.test', scheduledAt: Date.now() + 60_000 });
    await service.worker!.shutdown();
    try {
      const started = Date.now();
      const cancel = await env.stack.api('DELETE', `/v1/scheduled/${res.body.id}`, { token: env.key });
      expect(cancel.status).toBe(503);
      expect(cancel.body.code).toBe('scheduler_unavailable');
      expect(Date.now() - started).toBeLessThan(10_000);
    } finally {
      service.worker = await startWorker({
        core: service.core,
        address: service.temporalAddress,
        workflowBundle: { codePath: inject('workflowBundlePath') },
      });
    }
    const again = await eventually(
      async () => {
        const r = await env.stack.api('DELETE', `/v1/scheduled/${res.body.id}`, { token: env.key });
        return r.status === 200 ? r : undefined;
      },
      30_000,
      500,
    );
    expect(again.body.status).toBe('canceled');
  });

  it('a cancel racing the timer is decided once: canceled and never sent, or too late and sent exactly once', async () => {
    const outcomes: string[] = [];
    for (let i = 0; i < 8; i++) {
      const addr = `race-${i}@rcpt.test`;
      const at = Date.now() + 1200;
      const res = await env.send({ to: addr, scheduledAt: at });
      await new Promise((r) => setTimeout(r, Math.max(0, at - Date.now() - 40 + i * 10)));
      const cancel = await env.stack.api('DELETE', `/v1/scheduled/${res.body.id}`, { token: env.key });
      expect([200, 409]).toContain(cancel.status);
      await handle(res.body.id).result();
      const sent = env.sink.received.filter(to(addr)).length;
      if (cancel.status === 200) {
        expect(sent).toBe(0);
        expect((await row(res.body.id)).status).toBe('canceled');
      } else {
        await env.sink.waitFor(to(addr));
        expect(env.sink.received.filter(to(addr)).length).toBe(1);
        expect((await row(res.body.id)).status).toBe('sent');
      }
      outcomes.push(cancel.status === 200 ? 'canceled' : 'too_late');
    }
    expect(outcomes).toHaveLength(8);
  });
});
