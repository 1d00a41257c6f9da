import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { eq, inArray } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createShapingStore } from '../core/shaping/store.js';
import { schema } from '../db/index.js';
import { connectTemporal } from '../temporal/client.js';
import { sweepOutboundWorkflow } from '../workflows/sweep-outbound.js';
import { startTestDns } from './helpers/dns.js';
import { freePort } from './helpers/ports.js';
import { startShapingMx } from './helpers/shaping-mx.js';
import { eventually, startStack, type TestStack } from './helpers/stack.js';
import { startWorkerProcess } from './helpers/worker-process.js';

/**
 * Egress shaping per site (issue 24, docs/deliverability.md) against loopback MX servers that count
 * connections: a connection limit two domains share through MX rollup, held across two worker
 * processes; a site that answers 421 4.7.28 is suspended by an automation rule and sees no connection
 * until the suspension ends, while another site's mail goes on; every message arrives exactly once.
 */
const SERVICE = 'shaping.svc.test';
const FROM = `hello@acme.${SERVICE}`;
const OPERATOR = 'operator-token-for-shaping-tests-0123456789';
const MX = { shared: '127.0.0.2', busy: '127.0.0.3', calm: '127.0.0.4' };
const SHAPING = `
["default"]
connection_limit = 3
max_deliveries_per_connection = 4

[["default".automation]]
regex = '^421[ -]4\\.7\\.28'
action = "Suspend"
duration = "4s"

# Its MX set is shared-b.test's too: one site, one limit (MX rollup).
["shared-a.test"]
connection_limit = 2
max_message_rate = "4/s"

["busy.test"]
connection_limit = 1
`;

let stack: TestStack;
let key: string;
let workerEnv: Record<string, string>;
let dns: Awaited<ReturnType<typeof startTestDns>>;
const mx: Record<keyof typeof MX, Awaited<ReturnType<typeof startShapingMx>>> = {} as never;

beforeAll(async () => {
  const port = await freePort();
  mx.shared = await startShapingMx({ host: MX.shared, port });
  mx.busy = await startShapingMx({ host: MX.busy, port, acceptFirst: 3, refuseForMs: 1500 });
  mx.calm = await startShapingMx({ host: MX.calm, port });
  dns = await startTestDns();
  for (const d of ['shared-a.test', 'shared-b.test'])
    dns.zone.set(d, 'MX', [{ value: 'mx.shared.test', priority: 10 }]);
  dns.zone.set('busy.test', 'MX', [{ value: 'mx.busy.test', priority: 10 }]);
  dns.zone.set('calm.test', 'MX', [{ value: 'mx.calm.test', priority: 10 }]);
  for (const [name, ip] of Object.entries(MX)) dns.zone.set(`mx.${name}.test`, 'A', [{ value: ip }]);
  const file = join(mkdtempSync(join(tmpdir(), 'svc-shaping-')), 'shaping.toml');
  writeFileSync(file, SHAPING);
  const env = {
    OUTBOUND_MODE: 'mx',
    MX_PORT: String(port),
    DNS_SERVERS: dns.server.address,
    SERVICE_DOMAIN: SERVICE,
    OUTBOUND_RETRY_SCHEDULE: '500,500,500',
    ATTACHMENT_FETCH_ALLOW_PRIVATE: '1',
    ALLOW_PRIVATE_NETWORKS: '1',
    SHAPING_FILE: file,
    OPERATOR_TOKEN: OPERATOR,
  };
  stack = await startStack(env);
  const c = stack.config;
  workerEnv = {
    ...env,
    DATABASE_URL: c.databaseUrl!,
    TEMPORAL_ADDRESS: stack.service.temporalAddress,
    TEMPORAL_TASK_QUEUE: c.temporal.taskQueue,
    SECRET_KEY: c.secretKey,
    DATA_DIR: c.dataDir,
    NODE_ENV: 'test',
  };
  const s = (
    await stack.api('POST', '/api/auth/signup', {
      body: { email: 'shaping@example.com', password: 'shaping password' },
    })
  ).body;
  await stack.service.core.db
    .update(schema.users)
    .set({ emailVerified: true, plan: 'unlimited' })
    .where(eq(schema.users.id, s.user.id));
  await stack.api('POST', '/api/domains/subdomain', { token: s.token, body: { subdomain: 'acme' } });
  key = (await stack.api('GET', '/api/keys', { token: s.token })).body.key;
}, 180_000);

afterAll(async () => {
  await stack?.stop();
  for (const s of Object.values(mx)) await s?.close();
  await dns?.close();
});

async function sendBatch(to: string[]): Promise<string[]> {
  const res = await stack.api('POST', '/v1/send/batch', {
    token: key,
    body: { from: FROM, subject: 'shaped', text: 'hello', recipients: to.map((t) => ({ to: t })) },
  });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.results.map((r: { id: string }) => r.id);
}
const rowsOf = (ids: string[]) =>
  stack.service.core.db.select().from(schema.messages).where(inArray(schema.messages.id, ids));
const allSent = (ids: string[], timeoutMs = 90_000) =>
  eventually(
    async () => {
      const rows = await rowsOf(ids);
      if (rows.length === ids.length && rows.every((r) => r.status === 'sent')) return rows;
      // Not yet: say where the messages are, so a timeout names the ones that never went (and their last step).
      const by = new Map<string, number>();
      for (const r of rows) by.set(r.status, (by.get(r.status) ?? 0) + 1);
      const late = rows.find((r) => r.status !== 'sent');
      throw new Error(
        `${[...by].map(([status, n]) => `${n} ${status}`).join(', ')} of ${ids.length}` +
          (late ? `; ${late.id}: ${JSON.stringify((late.trail ?? []).slice(-3))}` : ''),
      );
    },
    timeoutMs,
    200,
  );
const sites = async () => {
  const res = await stack.api('GET', '/api/deliverability/sites', { token: OPERATOR });
  expect(res.status).toBe(200);
  return res.body as { sites: any[]; recentActions: any[] };
};

describe('egress shaping per site', () => {
  it('two domains with the same MX hosts share one connection limit, held across two worker processes; every message arrives once', async () => {
    const worker = await startWorkerProcess(workerEnv);
    try {
      const to = [
        ...Array.from({ length: 30 }, (_, i) => `a${i}@shared-a.test`),
        ...Array.from({ length: 30 }, (_, i) => `b${i}@shared-b.test`),
      ];
      const ids = [...(await sendBatch(to.slice(0, 30))), ...(await sendBatch(to.slice(30)))];
      // Two worker processes on two cores, one of them still starting: on a slow machine this takes past 90 s.
      const rows = await allSent(ids, 150_000);
      for (const a of to) expect(mx.shared.copies.get(a), a).toBe(1);
      // The server counted: never more than the site's 2 connections at once, and a new one every 4 messages.
      expect(mx.shared.maxOpen).toBeLessThanOrEqual(2);
      expect(mx.shared.connectedAt.length).toBeGreaterThanOrEqual(60 / 4);
      // 60 messages at once against 4/s (a burst of 1): some waited for their site, on a timer, and said so (at 20/s a
      // loaded machine delivered slower than the rate and none waited).
      expect(rows.some((r) => (r.trail ?? []).some((t: { status: string }) => t.status === 'throttled'))).toBe(true);
      const site = (await sites()).sites.find((s) => s.site === 'mx.shared.test');
      expect(site).toMatchObject({
        limits: { connection_limit: 2, max_message_rate: '4/s', max_deliveries_per_connection: 4 },
        sources: ['default', 'shared-a.test'],
      });
      expect([...site.domains].sort()).toEqual(['shared-a.test', 'shared-b.test']);
    } finally {
      await worker.kill();
    }
  }, 240_000);

  it('a site answering 421 4.7.28 is suspended: no connection until the suspension ends, another site is served meanwhile, then its mail drains', async () => {
    const db = stack.service.core.db;
    const busy = await sendBatch(Array.from({ length: 10 }, (_, i) => `u${i}@busy.test`));
    const suspension = await eventually(
      async () =>
        (await db.select().from(schema.shapingActions).where(eq(schema.shapingActions.site, 'mx.busy.test')))[0],
      60_000,
      50,
    );
    expect(suspension).toMatchObject({ action: 'Suspend', rule: expect.stringContaining('4\\.7\\.28') });
    expect(suspension.cause).toMatch(/^421 4\.7\.28 Our system has detected/);
    expect(suspension.expiresAt - suspension.createdAt).toBe(4000);

    // The listing shows the suspension and its cause while it lasts.
    const listed = (await sites()).sites.find((s) => s.site === 'mx.busy.test');
    expect(listed.suspension).toMatchObject({
      until: suspension.expiresAt,
      cause: suspension.cause,
      rule: suspension.rule,
    });

    // Another site's mail goes out during the suspension.
    const calm = await sendBatch(['c1@calm.test', 'c2@calm.test']);
    await allSent(calm);
    const calmDoneAt = Date.now();
    expect(calmDoneAt).toBeLessThan(suspension.expiresAt);

    const rows = await allSent(busy);
    for (let i = 0; i < 10; i++) expect(mx.busy.copies.get(`u${i}@busy.test`), `u${i}`).toBe(1);
    expect(mx.busy.refusals).toBeGreaterThan(0);
    // The server saw no connection open while the site was suspended, and never two at once.
    expect(mx.busy.connectedAt.filter((t) => t >= suspension.createdAt && t < suspension.expiresAt)).toEqual([]);
    expect(mx.busy.maxOpen).toBe(1);
    // Messages that met the suspension waited for it (trail), none bounced.
    expect(
      rows.some((r) =>
        (r.trail ?? []).some(
          (t: { status: string; response: string }) => t.status === 'throttled' && t.response.includes('suspended'),
        ),
      ),
    ).toBe(true);
    expect(rows.every((r) => Object.values(r.recipients ?? {}).every((s) => s.status === 'sent'))).toBe(true);
  }, 180_000);

  it('the sweep hands a stranded message for a suspended site to its own run and returns; the message goes when the suspension ends', async () => {
    const db = stack.service.core.db;
    const store = createShapingStore(db);
    const until = Date.now() + 20_000;
    await store.touch('mx.calm.test', {}, 'calm.test', { message: 1, connection: 1 });
    await store.suspend('mx.calm.test', until, 'test', '421 4.7.0 suspended by the test');
    const id = 'msg_stranded_for_a_suspended_site';
    const old = Date.now() - 5 * 60_000;
    await db.insert(schema.messages).values({
      id,
      userId: null,
      direction: 'outbound',
      kind: 'system',
      fromAddr: `svc <no-reply@${SERVICE}>`,
      toAddrs: ['late@calm.test'],
      subject: 'stranded',
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
    try {
      // (The scheduled sweep may get to the row first: either way one run, named after it, takes it.)
      await t.client.workflow.execute(sweepOutboundWorkflow, {
        taskQueue: t.taskQueue,
        workflowId: `test-sweep-${Date.now()}`,
        args: [{ retrySchedule: [500], graceMs: 0 }],
      });
      // Returned while the site is still suspended; the message waits in its own run.
      expect(Date.now()).toBeLessThan(until);
      const row = await eventually(
        async () => {
          const [r] = await db.select().from(schema.messages).where(eq(schema.messages.id, id));
          return r?.workflowId ? r : undefined;
        },
        10_000,
        100,
      );
      expect(row).toMatchObject({ status: 'queued', workflowId: `outbound-${id}-sweep` });
      expect(Date.now()).toBeLessThan(until);
      expect(mx.calm.copies.get('late@calm.test')).toBeUndefined();
      await allSent([id], 90_000);
      expect(mx.calm.copies.get('late@calm.test')).toBe(1);
      expect(mx.calm.connectedAt.filter((c) => c < until && c > until - 20_000).length).toBe(0);
      // The run ends just after it records the message sent: wait for its result, then read its status.
      const handle = t.client.workflow.getHandle(`outbound-${id}-sweep`);
      await handle.result();
      expect((await handle.describe()).status.name).toBe('COMPLETED');
    } finally {
      await t.connection.close();
    }
  }, 180_000);

  it('GET /api/deliverability/sites needs the operator credential', async () => {
    expect((await stack.api('GET', '/api/deliverability/sites')).status).toBe(401);
    expect((await stack.api('GET', '/api/deliverability/sites', { token: key })).status).toBe(401);
    const body = await sites();
    expect(body.recentActions.some((a) => a.site === 'mx.busy.test' && a.action === 'Suspend')).toBe(true);
  });
});
