import { eq, inArray } from 'drizzle-orm';
import nodemailer from 'nodemailer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schema } from '../db/index.js';
import { connectTemporal } from '../temporal/client.js';
import { engagementSweepScheduleId } from '../workflows/ids.js';
import { sweepOutboundWorkflow } from '../workflows/sweep-outbound.js';
import { createTestDatabase } from './helpers/pg.js';
import { eventually, startStack, type TestStack } from './helpers/stack.js';
import { startTcpProxy } from './helpers/tcp-proxy.js';
import { startWebhookReceiver } from './helpers/webhook-receiver.js';

/** The database goes away for 20 s mid-delivery; a webhook endpoint fails for ever while the sweep runs. */
const SERVICE = 'outage.svc.test';
let stack: TestStack;
let proxy: Awaited<ReturnType<typeof startTcpProxy>>;
let pg: Awaited<ReturnType<typeof createTestDatabase>>;
let hooks: Awaited<ReturnType<typeof startWebhookReceiver>>;
let token: string;
let domainId: string;

beforeAll(async () => {
  pg = await createTestDatabase();
  proxy = await startTcpProxy({ host: '127.0.0.1', port: Number(new URL(pg.url).port || 5432) });
  const url = new URL(pg.url);
  url.host = `127.0.0.1:${proxy.port}`;
  hooks = await startWebhookReceiver();
  stack = await startStack({
    SERVICE_DOMAIN: SERVICE,
    DATABASE_URL: url.toString(),
    WEBHOOK_RETRY_SCHEDULE: '300,300',
  });
  const s = (
    await stack.api('POST', '/api/auth/signup', { body: { email: 'outage@example.com', password: 'outage password' } })
  ).body;
  token = s.token;
  await stack.service.core.db.update(schema.users).set({ emailVerified: true }).where(eq(schema.users.id, s.user.id));
  domainId = (await stack.api('POST', '/api/domains/subdomain', { token, body: { subdomain: 'zero' } })).body.domain.id;
});
afterAll(async () => {
  await stack?.stop();
  await proxy?.close();
  await pg?.drop();
  await hooks?.close();
});

describe('infrastructure failures', () => {
  it('a 20 s database outage during zero-retention deliveries: every webhook delivered once, stored copies erased', async () => {
    const db = stack.service.core.db;
    await db.update(schema.domains).set({ zeroRetention: 1 }).where(eq(schema.domains.id, domainId));
    const hook = (
      await stack.api('PUT', `/api/domains/${domainId}/webhook`, { token, body: { url: `${hooks.base}/zero` } })
    ).body;
    hooks.secret('/zero', hook.signingSecret);
    hooks.delay('/zero', 400); // a slow receiver: some POSTs are in flight when the database goes
    const smtp = nodemailer.createTransport({
      host: '127.0.0.1',
      port: stack.service.smtpPort!,
      secure: false,
      ignoreTLS: true,
    });
    const N = 20;
    for (let i = 0; i < N; i++)
      await smtp.sendMail({
        from: 'a@sender.example',
        to: `box${i}@zero.${SERVICE}`,
        subject: `outage ${i}`,
        text: `body ${i}`,
      });
    const ids = (
      await db.select({ id: schema.messages.id }).from(schema.messages).where(eq(schema.messages.domainId, domainId))
    ).map((r) => r.id);
    expect(ids).toHaveLength(N);
    await hooks.waitFor('/zero', 3, 30_000);
    proxy.cut();
    await new Promise((r) => setTimeout(r, 20_000)); // the outage itself
    proxy.restore();
    await eventually(async () => new Set(hooks.hitsOn('/zero').map((h) => h.json?.id)).size === N, 180_000, 500);
    const perMessage = new Map<string, number>();
    for (const h of hooks.hitsOn('/zero')) perMessage.set(h.json.id, (perMessage.get(h.json.id) ?? 0) + 1);
    expect([...perMessage.values()].every((n) => n === 1)).toBe(true);
    expect(hooks.hitsOn('/zero').every((h) => h.verified)).toBe(true);
    await eventually(
      async () =>
        (await db.select().from(schema.inboundRaw).where(inArray(schema.inboundRaw.messageId, ids))).length === 0,
      60_000,
      500,
    );
  }, 300_000);

  it('Temporal refusing the start at accept time: the 250 still comes (the message is durable), and the sweep starts its delivery', async () => {
    const port = stack.service.core.workflows;
    const start = port.startInboundBatch;
    // The start is group-committed after the 250: the stub stays until the batcher has called it.
    let refused!: () => void;
    const startRefused = new Promise<void>((resolve) => {
      refused = resolve;
    });
    port.startInboundBatch = async () => {
      refused();
      throw new Error('temporal unavailable');
    };
    await stack.service.core.db.update(schema.domains).set({ zeroRetention: 0 }).where(eq(schema.domains.id, domainId));
    hooks.delay('/zero', 0);
    const smtp = nodemailer.createTransport({
      host: '127.0.0.1',
      port: stack.service.smtpPort!,
      secure: false,
      ignoreTLS: true,
    });
    try {
      const info = await smtp.sendMail({
        from: 'b@sender.example',
        to: `late@zero.${SERVICE}`,
        subject: 'started by the sweep',
        text: 'x',
      });
      expect(info.response).toMatch(/^250/);
      await startRefused;
    } finally {
      port.startInboundBatch = start;
    }
    const t = await connectTemporal({
      address: stack.service.temporalAddress,
      namespace: 'default',
      taskQueue: stack.config.temporal.taskQueue,
    });
    try {
      const r = await t.client.workflow.execute(sweepOutboundWorkflow, {
        taskQueue: t.taskQueue,
        workflowId: `test-sweep-${Date.now()}`,
        args: [{ retrySchedule: [], graceMs: 0 }],
      });
      expect(r.inbound).toBeGreaterThanOrEqual(1);
    } finally {
      await t.connection.close();
    }
    await eventually(async () => hooks.hitsOn('/zero').find((h) => h.json?.subject === 'started by the sweep'), 30_000);
  });

  it('a failing engagement endpoint plus the sweep schedule: one delivery per event, each posted once per attempt', async () => {
    const db = stack.service.core.db;
    await db.update(schema.domains).set({ zeroRetention: 0 }).where(eq(schema.domains.id, domainId));
    hooks.on('/down', () => ({ status: 500 }));
    await stack.api('PUT', `/api/domains/${domainId}/tracking-webhook`, { token, body: { url: `${hooks.base}/down` } });
    const key = (await stack.api('GET', '/api/keys', { token })).body.key;
    const t = await connectTemporal({
      address: stack.service.temporalAddress,
      namespace: 'default',
      taskQueue: stack.config.temporal.taskQueue,
    });
    try {
      const sweep = t.client.schedule.getHandle(engagementSweepScheduleId(stack.config.temporal.taskQueue));
      for (let i = 0; i < 10; i++) {
        await stack.api('POST', '/v1/send', {
          token: key,
          body: { from: `a@zero.${SERVICE}`, to: `reader${i}@example.org`, subject: `e${i}`, text: 'x' },
        });
        await sweep.trigger();
      }
      // Events left pending look stranded to the sweep at once: make every one of them old.
      await db
        .update(schema.events)
        .set({ createdAt: Date.now() - 120_000 })
        .where(eq(schema.events.domainId, domainId));
      for (let i = 0; i < 3; i++) await sweep.trigger();
      const events = await eventually(
        async () => {
          const rows = await db.select().from(schema.events).where(eq(schema.events.domainId, domainId));
          return rows.length === 10 && rows.every((e) => e.webhookState === 'failed') ? rows : undefined;
        },
        60_000,
        250,
      );
      const deliveries = await eventually(
        async () => {
          const rows = await db.select().from(schema.deliveries).where(eq(schema.deliveries.kind, 'engagement'));
          return rows.length >= 10 && rows.every((d) => d.status === 'failed') ? rows : undefined;
        },
        60_000,
        250,
      );
      expect(deliveries).toHaveLength(10);
      expect(new Set(deliveries.map((d) => (d.payload as { id: string }).id))).toEqual(
        new Set(events.map((e) => e.id)),
      );
      // Each event: 3 attempts in all (the first by the dispatcher, two on its ladder), never more.
      const hitsPerEvent = new Map<string, number>();
      for (const h of hooks.hitsOn('/down')) hitsPerEvent.set(h.json.id, (hitsPerEvent.get(h.json.id) ?? 0) + 1);
      expect([...hitsPerEvent.values()]).toEqual(Array(10).fill(3));
    } finally {
      await t.connection.close();
    }
  }, 120_000);
});
