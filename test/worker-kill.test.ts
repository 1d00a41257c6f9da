import { inArray } from 'drizzle-orm';
import nodemailer from 'nodemailer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schema } from '../db/index.js';
import { eventually, startStack, type TestStack } from './helpers/stack.js';
import { startWebhookReceiver } from './helpers/webhook-receiver.js';
import { startWorkerProcess, workerEnvOf } from './helpers/worker-process.js';

/**
 * The worker killed as a crash kills it (SIGKILL, no drain) while inbound webhook POSTs are in flight: the
 * API and SMTP ingress run in this process, the worker in its own, and the receiver holds the POSTs open so
 * the kill lands mid-delivery. A new worker finishes the deliveries; each message is delivered once in the
 * database, and a POST cut off by the kill is sent again with the same body (the same message `id`).
 */
const SERVICE = 'kill.svc.test';
const DOMAIN = `inbox.${SERVICE}`;
let stack: TestStack;
let hooks: Awaited<ReturnType<typeof startWebhookReceiver>>;
let workerEnv: Record<string, string>;

beforeAll(async () => {
  hooks = await startWebhookReceiver();
  const env = { SERVICE_DOMAIN: SERVICE, WEBHOOK_RETRY_SCHEDULE: '300,300,300', ALLOW_PRIVATE_NETWORKS: '1' };
  stack = await startStack(env, ['api', 'smtp']);
  workerEnv = workerEnvOf(stack, env);
}, 120_000);
afterAll(async () => {
  await stack?.stop();
  await hooks?.close();
});

const smtp = () =>
  nodemailer.createTransport({ host: '127.0.0.1', port: stack.service.smtpPort!, secure: false, ignoreTLS: true });

describe('a worker killed during inbound webhook deliveries', () => {
  it('a new worker delivers every message, each once in the database; a cut-off POST repeats its body', async () => {
    const s = (
      await stack.api('POST', '/api/auth/signup', { body: { email: 'kill@example.com', password: 'kill password' } })
    ).body;
    const domainId = (
      await stack.api('POST', '/api/domains/subdomain', { token: s.token, body: { subdomain: 'inbox' } })
    ).body.domain.id;
    const hook = await stack.api('PUT', `/api/domains/${domainId}/webhook`, {
      token: s.token,
      body: { url: `${hooks.base}/kill` },
    });
    expect(hook.status).toBe(200);
    hooks.secret('/kill', hook.body.signingSecret);
    const db = stack.service.core.db;
    const delivered = async (ids: string[]) => {
      const rows = await db.select().from(schema.deliveries).where(inArray(schema.deliveries.messageId, ids));
      return rows.length === ids.length && rows.every((d) => d.status === 'delivered') ? rows : undefined;
    };
    const t = smtp();
    const mail = (i: number) =>
      t.sendMail({ from: 'far@sender.example', to: `k${i}@${DOMAIN}`, subject: `kill ${i}`, text: `message ${i}` });
    let worker = await startWorkerProcess(workerEnv);
    try {
      // Three messages delivered before the kill.
      for (let i = 0; i < 3; i++) await mail(i);
      const before = [...new Set((await hooks.waitFor('/kill', 3)).map((h) => h.json.id as string))];
      expect(before).toHaveLength(3);
      await eventually(async () => delivered(before), 30_000);

      // Five more, their POSTs held open by the receiver; the worker is killed while all five wait for an answer.
      hooks.hold('/kill');
      for (let i = 3; i < 8; i++) await mail(i);
      const held = (await hooks.waitFor('/kill', 8, 30_000)).slice(3);
      const inFlight = [...new Set(held.map((h) => h.json.id as string))];
      expect(inFlight).toHaveLength(5);
      await worker.kill();
      expect(worker.child.signalCode).toBe('SIGKILL');
      hooks.release('/kill'); // the answers go to connections the kill closed
      expect(await delivered(inFlight)).toBeUndefined();

      worker = await startWorkerProcess(workerEnv);
      const rows = await eventually(async () => delivered([...before, ...inFlight]), 90_000, 200);

      // In the database: one delivery row per message, delivered by exactly one successful attempt.
      expect(rows).toHaveLength(8);
      const attempts = await db
        .select()
        .from(schema.deliveryAttempts)
        .where(
          inArray(
            schema.deliveryAttempts.deliveryId,
            rows.map((r) => r.id),
          ),
        );
      for (const r of rows)
        expect(
          attempts.filter((a) => a.deliveryId === r.id && a.ok === 1),
          r.id,
        ).toHaveLength(1);

      // At the receiver: every message arrived, signed. Those delivered before the kill arrived once; a POST
      // cut off by the kill was sent again by the new worker, with the same body, so the customer's server
      // de-duplicates on the payload's `id` (docs/receiving.md).
      const hits = hooks.hitsOn('/kill');
      expect(hits.every((h) => h.verified)).toBe(true);
      expect(new Set(hits.map((h) => h.json.id)).size).toBe(8);
      for (const id of before)
        expect(
          hits.filter((h) => h.json.id === id),
          id,
        ).toHaveLength(1);
      for (const id of inFlight) {
        const mine = hits.filter((h) => h.json.id === id);
        expect(mine, id).toHaveLength(2);
        expect(mine[1]!.body, id).toBe(mine[0]!.body);
      }
    } finally {
      t.close();
      await worker.kill();
    }
  }, 180_000);
});
