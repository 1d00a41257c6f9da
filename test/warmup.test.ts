import { eq, inArray } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schema } from '../db/index.js';
import { warmupWorkflowId } from '../workflows/ids.js';
import { startSendingStack, type SendingStack } from './helpers/sending.js';
import { eventually } from './helpers/stack.js';

/**
 * Domain warm-up (issue 24 item 4): a plan of 3 then 5 messages per destination site a day (a test
 * "day" of 6 s). Eight messages: three go on day 1, the others wait for day 2 (on their run's timer,
 * not failing), then go; the plan's workflow is visible and ends when the plan is done.
 */
let env: SendingStack;
let domainId: string;

beforeAll(async () => {
  env = await startSendingStack({ env: { WARMUP_DAY_MS: '6000' } });
  await env.stack.service.core.db.update(schema.users).set({ plan: 'unlimited' });
  const domains = (await env.stack.api('GET', '/api/domains', { token: env.session })).body;
  domainId = domains[0].id;
}, 120_000);

afterAll(async () => {
  await env?.stop();
});

const domain = async () => (await env.stack.api('GET', `/api/domains/${domainId}`, { token: env.session })).body.domain;

describe('domain warm-up', () => {
  it("holds each site to the day's volume; the rest waits for the next day and goes then, once each", async () => {
    const started = await env.stack.api('PUT', `/api/domains/${domainId}/warmup`, {
      token: env.session,
      body: { schedule: [3, 5] },
    });
    expect(started.status, JSON.stringify(started.body)).toBe(200);
    expect(started.body.warmup).toMatchObject({
      status: 'warming',
      day: 1,
      days: 2,
      dailyLimit: 3,
      schedule: [3, 5],
      workflowId: warmupWorkflowId(domainId),
    });
    const firstDayEnds = started.body.warmup.nextDayAt as number;

    const res = await env.stack.api('POST', '/v1/send/batch', {
      token: env.key,
      body: {
        from: 'hello@acme.send.svc.test',
        subject: 'warm',
        text: 'hello',
        recipients: Array.from({ length: 8 }, (_, i) => ({ to: `w${i}@rcpt.test` })),
      },
    });
    expect(res.status).toBe(200);
    const ids: string[] = res.body.results.map((r: { id: string }) => r.id);
    const db = env.stack.service.core.db;

    // Day 1: three go, five wait (queued, a throttled trail entry naming the warm-up), none fails.
    const waiting = await eventually(
      async () => {
        const rows = await db.select().from(schema.messages).where(inArray(schema.messages.id, ids));
        const held = rows.filter(
          (r) =>
            r.status === 'queued' &&
            (r.trail ?? []).some((t) => t.status === 'throttled' && t.response.includes('warm-up day 1')),
        );
        return rows.filter((r) => r.status === 'sent').length === 3 && held.length === 5 ? held : undefined;
      },
      20_000,
      50,
    );
    expect(waiting.every((r) => r.nextAttemptAt! >= firstDayEnds - 1000)).toBe(true);
    const today = await domain();
    if (today.warmup.day === 1) expect(today.warmup.sentToday).toEqual({ 'sink.rcpt.test': 3 });
    expect(env.sink.received.length).toBe(3);

    // Day 2: the other five go.
    await eventually(
      async () => {
        const rows = await db.select().from(schema.messages).where(inArray(schema.messages.id, ids));
        return rows.every((r) => r.status === 'sent');
      },
      30_000,
      200,
    );
    for (let i = 0; i < 8; i++)
      expect(env.sink.received.filter((m) => m.to.includes(`w${i}@rcpt.test`)).length, `w${i}`).toBe(1);
    const sentAt = (await db.select().from(schema.messages).where(inArray(schema.messages.id, ids)))
      .map((r) => r.sentAt!)
      .sort((a, b) => a - b);
    expect(sentAt.slice(3).every((t) => t >= firstDayEnds)).toBe(true);

    // The plan's workflow ends after its last day; GET /api/domains/:id says the plan is done.
    const { connectTemporal } = await import('../temporal/client.js');
    const { client } = await connectTemporal({
      address: env.stack.service.temporalAddress,
      namespace: 'default',
      taskQueue: env.stack.config.temporal.taskQueue,
    });
    expect(await client.workflow.getHandle(warmupWorkflowId(domainId)).result()).toEqual({ outcome: 'done', day: 2 });
    expect((await domain()).warmup).toMatchObject({ status: 'done', dailyLimit: null, nextDayAt: null });
  }, 90_000);

  it('a plan can be stopped (and is gone from the domain); a foreign account cannot start one', async () => {
    const other = (
      await env.stack.api('POST', '/api/auth/signup', {
        body: { email: 'other@example.com', password: 'other password' },
      })
    ).body.token;
    expect((await env.stack.api('PUT', `/api/domains/${domainId}/warmup`, { token: other, body: {} })).status).toBe(
      404,
    );
    const started = await env.stack.api('PUT', `/api/domains/${domainId}/warmup`, { token: env.session, body: {} });
    expect(started.body.warmup).toMatchObject({ day: 1, dailyLimit: 50, days: 12 });
    expect((await env.stack.api('DELETE', `/api/domains/${domainId}/warmup`, { token: env.session })).body).toEqual({
      ok: true,
    });
    expect((await domain()).warmup).toBeNull();
    expect((await env.stack.api('DELETE', `/api/domains/${domainId}/warmup`, { token: env.session })).status).toBe(404);
    const plan = await env.stack.service.core.db
      .select()
      .from(schema.warmupPlans)
      .where(eq(schema.warmupPlans.domainId, domainId));
    expect(plan).toEqual([]);
  });
});
