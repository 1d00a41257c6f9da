import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectTemporal } from '../temporal/client.js';
import { inboundBatchWorkflowId } from '../workflows/ids.js';
import { startInboundStack } from './helpers/inbound-stack.js';
import { eventually, type TestStack } from './helpers/stack.js';
import { startWebhookReceiver } from './helpers/webhook-receiver.js';

/**
 * What one message costs the database on the common path: a catch-all webhook, SMTP in, the webhook
 * delivered. Every statement any pg client of this process sends is counted (the ingress, the worker and
 * the contact writer run in this process), from the SMTP transaction until the batch run that delivered
 * the message has finished and the contact writer has flushed.
 */
const SERVICE = 'stm.svc.test';
const DOMAIN = `inbox.${SERVICE}`;
let inbound: Awaited<ReturnType<typeof startInboundStack>>;
let stack: TestStack;
let hooks: Awaited<ReturnType<typeof startWebhookReceiver>>;

/** Statements sent while `counting`, by their first words. */
let counting = false;
const sent = new Map<string, number>();
const query = pg.Client.prototype.query;
/** The test's own client, not counted: it looks for the contacts the contact writer records. */
let probe: pg.Client;

beforeAll(async () => {
  pg.Client.prototype.query = function (this: pg.Client, ...args: any[]) {
    if (counting && this !== probe) {
      const q = args[0] as string | { text?: string; name?: string };
      const text = typeof q === 'string' ? q : (q.text ?? q.name ?? '?');
      const head = text.replace(/\s+/g, ' ').slice(0, 80);
      sent.set(head, (sent.get(head) ?? 0) + 1);
    }
    return (query as any).apply(this, args);
  } as typeof query;
  hooks = await startWebhookReceiver();
  inbound = await startInboundStack(SERVICE, 'statements');
  stack = inbound.stack;
  const { token, domain } = inbound;
  const res = await stack.api('PUT', `/api/domains/${domain.id}/webhook`, {
    token,
    body: { url: `${hooks.base}/in` },
  });
  expect(res.status).toBe(200);
  probe = inbound.probe;
});
afterAll(async () => {
  pg.Client.prototype.query = query;
  await inbound?.stop();
  await hooks?.close();
});

const total = () => [...sent.values()].reduce((a, b) => a + b, 0);
const breakdown = () =>
  [...sent]
    .sort((a, b) => b[1] - a[1])
    .map(([head, n]) => `${n}  ${head}`)
    .join('\n');

/**
 * Sends `n` messages over `n` connections at once (each from its own sender to its own address), waits for
 * every webhook POST and for the batch runs that made them, flushes the contact writer, and answers the
 * statements sent meanwhile.
 */
async function deliver(n: number, tag: string): Promise<number> {
  const smtp = inbound.smtp(n);
  const tc = await connectTemporal({
    address: stack.service.temporalAddress,
    namespace: 'default',
    taskQueue: stack.config.temporal.taskQueue,
  });
  const before = hooks.hitsOn('/in').length;
  sent.clear();
  counting = true;
  try {
    const infos = await Promise.all(
      Array.from({ length: n }, (_, i) =>
        smtp.sendMail({
          from: `Sender ${tag}${i} <${tag}${i}@far.example>`,
          to: `${tag}${i}@${DOMAIN}`,
          subject: `${tag} ${i}`,
          text: `Hello ${i}`,
          html: `<p>Hello <b>${i}</b></p>`,
        }),
      ),
    );
    const ids = infos.map((info) => /queued as (msg_[\w-]+)/.exec(info.response)![1]!);
    const hits = await hooks.waitFor('/in', before + n);
    expect(new Set(hits.slice(before).map((h) => h.json.id as string))).toEqual(new Set(ids));
    // The batch runs that made the POSTs, each named by its first message (the others are in no run's name).
    for (const id of ids)
      await tc.client.workflow
        .getHandle(inboundBatchWorkflowId(id))
        .result()
        .catch(() => undefined);
    // Each sender recorded as a contact (the contact writer's group commit may be under way already).
    await stack.service.core.contacts.flushTouches();
    const senders = Array.from({ length: n }, (_, i) => `${tag}${i}@far.example`);
    await eventually(
      async () => {
        const found = await probe.query('select count(*)::int as n from contacts where email = any($1)', [senders]);
        return (found.rows[0] as { n: number }).n === n;
      },
      15_000,
      20,
    );
    return total();
  } finally {
    counting = false;
    smtp.close();
    await tc.connection.close();
  }
}

describe('statements per inbound message (catch-all webhook)', () => {
  it('one message alone, SMTP in to webhook delivered', async () => {
    await deliver(1, 'warm'); // prepared statements and the per-process caches filled
    const n = await deliver(1, 'one');
    console.log(`one message: ${n} statements\n${breakdown()}`);
    // 10, and two more when the message comes alone: the account's standing (RCPT's view, kept a second) and
    // the webhook's health (a healthy streak is written at most once a second) are read and written again.
    expect(n, breakdown()).toBeLessThanOrEqual(12);
  });

  it('a burst: the batch run, the health write and the contact writes are shared', async () => {
    const burst = 16;
    const n = await deliver(burst, 'burst');
    console.log(`burst of ${burst}: ${(n / burst).toFixed(2)} statements per message\n${breakdown()}`);
    // Per message: begin, the filing (its new folder, its UID and its body in one statement), the door's statement
    // with the message's rows, commit, and the attempt's record (5); the claim and the delivery rows once per batch
    // run, the contacts once per group commit, the webhook's health at most once a second. How the burst falls
    // into batches varies with timing.
    expect(n / burst, breakdown()).toBeLessThanOrEqual(8.5);
  });
});
