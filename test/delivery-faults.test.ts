import { eq, inArray } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schema } from '../db/index.js';
import { startTestDns } from './helpers/dns.js';
import { startFaultSink } from './helpers/fault-sink.js';
import { freePort } from './helpers/ports.js';
import { eventually, startStack, type TestStack } from './helpers/stack.js';
import { startWorkerProcess } from './helpers/worker-process.js';

/**
 * DESIGN.md, Delivery semantics, under faults: a mix of recipient domains (one MX stalls 90 s before
 * answering DATA, one answers 4xx to each recipient's first try, one refuses a recipient for good),
 * multi-domain messages, and the worker process killed (SIGKILL) and restarted mid-batch.
 */
const SERVICE = 'faults.svc.test';
const FROM = `hello@acme.${SERVICE}`;
const MX = { ok: '127.0.0.2', stall: '127.0.0.3', temp: '127.0.0.4', perm: '127.0.0.5' };

let stack: TestStack;
let key: string;
let workerEnv: Record<string, string>;
const sinks: Record<string, Awaited<ReturnType<typeof startFaultSink>>> = {};
let dns: Awaited<ReturnType<typeof startTestDns>>;

beforeAll(async () => {
  const port = await freePort();
  sinks.ok = await startFaultSink({ host: MX.ok, port });
  sinks.stall = await startFaultSink({ host: MX.stall, port, stallFirstDataMs: 90_000 });
  sinks.temp = await startFaultSink({
    host: MX.temp,
    port,
    onRcpt: (_a, n) => (n === 1 ? { code: 451, message: '4.7.1 Try again later' } : undefined),
  });
  sinks.perm = await startFaultSink({
    host: MX.perm,
    port,
    onRcpt: (a) => (a.startsWith('nobody') ? { code: 550, message: '5.1.1 No such user' } : undefined),
  });
  dns = await startTestDns();
  for (const [name, ip] of Object.entries(MX)) {
    dns.zone.set(`${name}.test`, 'MX', [{ value: `mx.${name}.test`, priority: 10 }]);
    dns.zone.set(`mx.${name}.test`, 'A', [{ value: ip }]);
  }
  const env = {
    OUTBOUND_MODE: 'mx',
    MX_PORT: String(port),
    DNS_SERVERS: dns.server.address,
    SERVICE_DOMAIN: SERVICE,
    OUTBOUND_RETRY_SCHEDULE: '500,500,500',
    ATTACHMENT_FETCH_ALLOW_PRIVATE: '1',
    ALLOW_PRIVATE_NETWORKS: '1',
  };
  stack = await startStack(env, ['api', 'smtp']);
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
    await stack.api('POST', '/api/auth/signup', { body: { email: 'faults@example.com', password: 'faults password' } })
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
  for (const s of Object.values(sinks)) await s.close();
  await dns?.close();
});

async function sendAll(bodies: { to: string[] }[]): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < bodies.length; i += 10) {
    const res = await Promise.all(
      bodies.slice(i, i + 10).map((b, j) =>
        stack.api('POST', '/v1/send', {
          token: key,
          body: { from: FROM, subject: `m${i + j}`, text: 'hello', ...b },
        }),
      ),
    );
    for (const r of res) {
      expect(r.status).toBe(200);
      ids.push(r.body.id);
    }
  }
  return ids;
}
const copies = (address: string) => Object.values(sinks).reduce((n, s) => n + (s.copies.get(address) ?? 0), 0);

describe('outbound delivery under faults', () => {
  it('every recipient gets its copy once (at most twice for transactions in flight at the kill), per-recipient states are right, nothing is stranded', async () => {
    const db = stack.service.core.db;
    let worker = await startWorkerProcess(workerEnv);
    try {
      // Phase 1: 100 messages, and the worker killed mid-batch.
      const phase1 = [
        ...Array.from({ length: 60 }, (_, i) => ({ to: [`p1-${i}@ok.test`] })),
        ...Array.from({ length: 25 }, (_, i) => ({ to: [`p1-${i}@temp.test`] })),
        ...Array.from({ length: 15 }, (_, i) => ({ to: [`p1-m${i}@ok.test`, `p1-m${i}@temp.test`] })),
      ];
      const ids1 = await sendAll(phase1);
      await eventually(async () => sinks.ok!.total() >= 20, 60_000, 20);
      await worker.kill();
      worker = await startWorkerProcess(workerEnv);
      // Phase 2: 100 more after the restart, with the stalling MX and a permanent refusal in a multi-domain message.
      const phase2 = [
        ...Array.from({ length: 50 }, (_, i) => ({ to: [`p2-${i}@ok.test`] })),
        ...Array.from({ length: 20 }, (_, i) => ({ to: [`p2-${i}@stall.test`] })),
        ...Array.from({ length: 15 }, (_, i) => ({ to: [`p2-${i}@temp.test`] })),
        ...Array.from({ length: 10 }, (_, i) => ({ to: [`p2-m${i}@ok.test`, `p2-m${i}@temp.test`] })),
        ...Array.from({ length: 5 }, (_, i) => ({ to: [`p2-p${i}@ok.test`, `nobody${i}@perm.test`] })),
      ];
      const ids2 = await sendAll(phase2);
      const all = [...ids1, ...ids2];
      const rows = await eventually(
        async () => {
          const r = await db.select().from(schema.messages).where(inArray(schema.messages.id, all));
          return r.every((m) => m.status === 'sent') ? r : undefined;
        },
        240_000,
        500,
      );

      // Copies: phase 1 at least one and at most two each (a transaction cut off by the kill); phase 2 exactly one.
      const rcpts1 = phase1.flatMap((b) => b.to);
      const rcpts2 = phase2.flatMap((b) => b.to).filter((a) => !a.startsWith('nobody'));
      for (const a of rcpts1) expect([1, 2], a).toContain(copies(a));
      expect(rcpts1.filter((a) => copies(a) === 2).length).toBeLessThanOrEqual(40);
      for (const a of rcpts2) expect(copies(a), a).toBe(1);
      expect(sinks.stall!.stalled).toBe(1);
      for (let i = 0; i < 5; i++) expect(copies(`nobody${i}@perm.test`)).toBe(0);

      // Per-recipient states: a 4xx recipient was retried (2 attempts) while its ok.test companion was not.
      const byId = new Map(rows.map((r) => [r.id, r]));
      for (const [i, id] of ids2.slice(85, 95).entries()) {
        const rec = byId.get(id)!.recipients!;
        expect(rec[`p2-m${i}@ok.test`]).toMatchObject({ status: 'sent', attempts: 1 });
        expect(rec[`p2-m${i}@temp.test`]).toMatchObject({ status: 'sent', attempts: 2 });
      }
      // A permanent refusal bounces and suppresses that recipient alone; the message still counts as sent.
      for (const [i, id] of ids2.slice(95).entries()) {
        const rec = byId.get(id)!.recipients!;
        expect(rec[`p2-p${i}@ok.test`]!.status).toBe('sent');
        expect(rec[`nobody${i}@perm.test`]).toMatchObject({ status: 'bounced', attempts: 1 });
      }
      const sup = await db.select().from(schema.suppressions);
      expect(sup.map((s) => s.email).sort()).toEqual(
        Array.from({ length: 5 }, (_, i) => `nobody${i}@perm.test`).sort(),
      );
      // The stalled transaction timed out (deferred) and its retry delivered it; the trail shows both.
      const stalledRow = rows.find((r) =>
        r.trail?.some((t) => t.status === 'deferred' && r.toAddrs[0]!.includes('stall.test')),
      );
      expect(stalledRow?.trail?.map((t) => t.status)).toEqual(['deferred', 'sent']);
      // GET /api/messages/:id shows the recipients, the SMTP trail and the runs.
      const detail = (await stack.api('GET', `/api/messages/${ids2[85]}`, { token: key })).body;
      expect(detail.message.recipients).toHaveLength(2);
      expect(detail.trail.map((t: any) => t.status)).toEqual(['sent', 'deferred', 'sent']);
      expect(detail.runs.map((r: any) => r.workflowId)).toEqual(
        expect.arrayContaining([expect.stringMatching(/^outbound-/), `deferred-${ids2[85]}`]),
      );
    } finally {
      await worker.kill();
    }
  }, 420_000);
});
