import { connect } from 'node:net';
import nodemailer from 'nodemailer';
import { eq, inArray } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schema } from '../db/index.js';
import { connectTemporal } from '../temporal/client.js';
import { inboundDeliveryWorkflow } from '../workflows/inbound-delivery.js';
import { inboundBatchWorkflowId } from '../workflows/ids.js';
import { signatureHeaders } from '../core/webhooks/sign.js';
import { startTestDns } from './helpers/dns.js';
import { eventually, startStack, type TestStack } from './helpers/stack.js';
import { startWebhookReceiver } from './helpers/webhook-receiver.js';
import { runsOfMessage } from './helpers/visibility.js';

const SERVICE = 'in.svc.test';
const DOMAIN = `inbox.${SERVICE}`;
let stack: TestStack;
let dns: Awaited<ReturnType<typeof startTestDns>>;
let hooks: Awaited<ReturnType<typeof startWebhookReceiver>>;
let token: string;
let domainId: string;

beforeAll(async () => {
  dns = await startTestDns();
  hooks = await startWebhookReceiver();
  stack = await startStack({
    SERVICE_DOMAIN: SERVICE,
    DNS_SERVERS: dns.server.address,
    WEBHOOK_RETRY_SCHEDULE: '300,300,300',
    SMTP_MAX_MESSAGE_BYTES: '200000',
  });
  token = (
    await stack.api('POST', '/api/auth/signup', {
      body: { email: 'receiver@example.com', password: 'receiver password' },
    })
  ).body.token;
  domainId = (await stack.api('POST', '/api/domains/subdomain', { token, body: { subdomain: 'inbox' } })).body.domain
    .id;
});
afterAll(async () => {
  await stack?.stop();
  await hooks?.close();
  await dns?.close();
});

const smtp = () =>
  nodemailer.createTransport({
    host: '127.0.0.1',
    port: stack.service.smtpPort!,
    secure: false,
    ignoreTLS: true,
    tls: { rejectUnauthorized: false },
  });
async function setHook(path: string, ackMode: 'lenient' | 'ack' = 'lenient') {
  const res = await stack.api('PUT', `/api/domains/${domainId}/webhook`, {
    token,
    body: { url: `${hooks.base}${path}`, ackMode },
  });
  expect(res.status).toBe(200);
  hooks.secret(path, res.body.signingSecret);
  return res.body;
}
const deliveriesOf = async (messageId: string) =>
  (await stack.api('GET', `/api/messages/${messageId}`, { token })).body.deliveries;

describe('signature', () => {
  it('matches the known-answer vector of DESIGN.md', () => {
    const h = signatureHeaders('whsec_svc_test', '{"type":"email.received","id":"evt_123"}', 1750000000000);
    expect(h['x-svc-signature']).toBe(
      't=1750000000000,v1=9f9e150ea1ba2394647e2875b05b17c3248a054aceba3b6f1cd3223fe8f3f2a4',
    );
    expect(h['x-svc-timestamp']).toBe('1750000000000');
  });
});

describe('inbound mail to webhooks', () => {
  it('delivers a signed email.received with the DESIGN.md payload', async () => {
    const set = await setHook('/hook');
    expect(set).toMatchObject({
      webhookUrl: `${hooks.base}/hook`,
      ackMode: 'lenient',
      routeId: expect.stringMatching(/^rte_/),
      signingSecret: expect.stringMatching(/^whsec_/),
    });
    expect((await stack.api('GET', `/api/domains/${domainId}/webhook/secret`, { token })).body.secret).toBe(
      set.signingSecret,
    );
    await smtp().sendMail({
      from: 'Alice <alice@sender.example>',
      to: `hello@${DOMAIN}`,
      subject: 'Hi there',
      text: 'Plain body',
      html: '<p>HTML body</p>',
      references: '<root@sender.example>',
      attachments: [{ filename: 'notes.txt', content: 'attached notes' }],
    });
    const [hit] = await hooks.waitFor('/hook');
    expect(hit!.verified).toBe(true);
    expect(hit!.headers['x-svc-timestamp']).toMatch(/^\d+$/);
    const p = hit!.json;
    expect(p).toMatchObject({
      id: expect.stringMatching(/^msg_/),
      type: 'email.received',
      from: { address: 'alice@sender.example', name: 'Alice' },
      to: [{ address: `hello@${DOMAIN}` }],
      subject: 'Hi there',
      text: 'Plain body',
      html: '<p>HTML body</p>',
      threadId: '<root@sender.example>',
      auth: { spf: expect.anything(), dkim: expect.anything(), dmarc: expect.anything(), spam: null, arc: 'none' },
    });
    expect(Object.keys(p.auth).sort()).toEqual(['arc', 'dkim', 'dmarc', 'spam', 'spf']);
    expect(new Date(p.receivedAtIso).getTime()).toBe(p.receivedAt);
    expect(p.attachments).toEqual([
      {
        id: expect.any(String),
        filename: 'notes.txt',
        contentType: 'text/plain',
        size: 14,
        url: expect.stringContaining('/v1/attachments/'),
      },
    ]);
    const file = await fetch(p.attachments[0].url.replace(stack.config.publicUrl, stack.baseUrl));
    expect(await file.text()).toBe('attached notes');
    const dlv = await eventually(async () => {
      const d = (await deliveriesOf(p.id))[0];
      return d?.status === 'delivered' ? d : undefined;
    });
    expect(dlv).toMatchObject({
      id: expect.stringMatching(/^dlv_/),
      message_id: p.id,
      route_id: set.routeId,
      attempts: 1,
      last_status_code: 200,
      retry_attempts: 0,
    });
    const dom = (await stack.api('GET', `/api/domains/${domainId}`, { token })).body.domain;
    expect(dom).toMatchObject({
      webhookUrl: `${hooks.base}/hook`,
      webhookAckMode: 'lenient',
      webhookStatus: { status: 'ok', code: 200, consecutiveFailures: 0, unhealthy: false },
    });
  });

  it('a receiver that fails twice then succeeds gets the message on the third attempt, with three att_ rows', async () => {
    await setHook('/flaky');
    hooks.on('/flaky', (_h, n) => (n <= 2 ? { status: 503, body: 'down' } : { status: 200, body: 'ok' }));
    await smtp().sendMail({ from: 'bob@sender.example', to: `flaky@${DOMAIN}`, subject: 'third time', text: 'x' });
    const hits = await hooks.waitFor('/flaky', 3);
    expect(hits.every((h) => h.verified)).toBe(true);
    expect(new Set(hits.map((h) => h.headers['x-svc-signature'])).size).toBe(3);
    const messageId = hits[0]!.json.id;
    const dlv = await eventually(async () => {
      const d = (await deliveriesOf(messageId))[0];
      return d?.status === 'delivered' ? d : undefined;
    });
    expect(dlv).toMatchObject({ attempts: 3, retry_attempts: 2, next_retry_at: null });
    const attempts = (await stack.api('GET', `/api/deliveries/${dlv.id}/attempts`, { token })).body.attempts;
    expect(attempts.map((a: any) => [a.attempt_number, a.ok, a.reason, a.response_status])).toEqual([
      [3, 1, null, 200],
      [2, 0, 'http_5xx', 503],
      [1, 0, 'http_5xx', 503],
    ]);
    expect(JSON.parse(attempts[0].request_headers)).toHaveProperty('x-svc-signature');
    expect(attempts[0].request_body).toContain('"type":"email.received"');
    expect(attempts[0].duration_ms).toBeGreaterThanOrEqual(0);
    // The batch made attempt 1 and handed the message to its own run, which did not post attempt 1 again.
    expect(hooks.hitsOn('/flaky')).toHaveLength(3);
    const runs = (await stack.api('GET', `/api/messages/${messageId}`, { token })).body.runs.map(
      (r: any) => r.workflowId,
    );
    expect(runs).toContain(`inbound-${messageId}`);
    expect(runs.some((id: string) => id.startsWith('inbound-batch-'))).toBe(true);
  });

  it('a burst shares batch runs: each message delivered once, its row and GET /api/messages/:id naming its run, its id in the run memo and its SvcMessageId', async () => {
    await setHook('/burst');
    const N = 40;
    const t = nodemailer.createTransport({
      host: '127.0.0.1',
      port: stack.service.smtpPort!,
      secure: false,
      ignoreTLS: true,
      pool: true,
      maxConnections: 8,
      maxMessages: Infinity,
    });
    try {
      await Promise.all(
        Array.from({ length: N }, (_, i) =>
          t.sendMail({ from: 'burst@sender.example', to: `burst${i}@${DOMAIN}`, subject: `burst ${i}`, text: `${i}` }),
        ),
      );
    } finally {
      t.close();
    }
    const hits = await hooks.waitFor('/burst', N);
    const ids = [...new Set(hits.map((h) => h.json.id as string))];
    expect(ids).toHaveLength(N);
    expect(hooks.hitsOn('/burst')).toHaveLength(N);
    const rows = await stack.service.core.db
      .select({ id: schema.messages.id, workflowId: schema.messages.workflowId })
      .from(schema.messages)
      .where(inArray(schema.messages.id, ids));
    expect(rows.every((r) => r.workflowId?.startsWith('inbound-batch-'))).toBe(true);
    // Starts are paced (INBOUND_STARTS_PER_SECOND, burst 5): 40 messages cannot each have had a run of their own.
    const runIds = new Set(rows.map((r) => r.workflowId!));
    expect(runIds.size).toBeLessThan(N);
    const one = rows[0]!;
    expect(
      (await stack.api('GET', `/api/messages/${one.id}`, { token })).body.runs.map((r: any) => r.workflowId),
    ).toContain(one.workflowId);
    const tc = await connectTemporal({
      address: stack.service.temporalAddress,
      namespace: 'default',
      taskQueue: stack.config.temporal.taskQueue,
    });
    try {
      const d = await tc.client.workflow.getHandle(one.workflowId!).describe();
      expect(await d.memo?.messageIds).toContain(one.id);
      expect(d.type).toBe('inboundBatchWorkflow');
    } finally {
      await tc.connection.close();
    }
    // A message that is not its batch's first is found by its id (SvcMessageId holds every id of the run).
    const shared = rows.find(
      (r) =>
        rows.some((o) => o.workflowId === r.workflowId && o.id !== r.id) && r.workflowId !== `inbound-batch-${r.id}`,
    )!;
    const found = await runsOfMessage(stack.service.temporalAddress, shared.id, shared.workflowId!);
    expect([...found.keys()]).toEqual([shared.workflowId]);
    expect(found.get(shared.workflowId!)).toEqual(
      expect.arrayContaining(rows.filter((r) => r.workflowId === shared.workflowId).map((r) => r.id)),
    );
  });

  it("a batch run cancelled while its POST is under way still drops a zero-retention message's stored copy (its finally)", async () => {
    const core = stack.service.core;
    await setHook('/slow');
    hooks.delay('/slow', 2_000);
    await core.db.update(schema.domains).set({ zeroRetention: 1 }).where(eq(schema.domains.id, domainId));
    const tc = await connectTemporal({
      address: stack.service.temporalAddress,
      namespace: 'default',
      taskQueue: stack.config.temporal.taskQueue,
    });
    try {
      await smtp().sendMail({
        from: 'cancel@sender.example',
        to: `slow@${DOMAIN}`,
        subject: 'cancelled batch',
        text: 'x',
      });
      const [hit] = await hooks.waitFor('/slow');
      const messageId = hit!.json.id as string;
      const [row] = await core.db.select().from(schema.messages).where(eq(schema.messages.id, messageId));
      expect(row!.workflowId).toMatch(/^inbound-batch-/);
      expect(
        await core.db.select().from(schema.inboundRaw).where(eq(schema.inboundRaw.messageId, messageId)),
      ).toHaveLength(1);
      const handle = tc.client.workflow.getHandle(row!.workflowId!);
      await handle.cancel();
      await expect(handle.result()).rejects.toThrow();
      expect((await handle.describe()).status.name).toBe('CANCELLED');
      // The POST under way finishes (no new one starts), then the run's finally drops the copy.
      expect(
        await core.db.select().from(schema.inboundRaw).where(eq(schema.inboundRaw.messageId, messageId)),
      ).toHaveLength(0);
    } finally {
      await tc.connection.close();
      await core.db.update(schema.domains).set({ zeroRetention: 0 }).where(eq(schema.domains.id, domainId));
      hooks.delay('/slow', 0);
    }
  });

  it('a message is delivered by one run only: two batches and the run a batch hands it to claim it in turn', async () => {
    await setHook('/claimed');
    const core = stack.service.core;
    const port = core.workflows;
    const start = port.startInboundBatch;
    let refused!: () => void;
    const startRefused = new Promise<void>((resolve) => {
      refused = resolve;
    });
    port.startInboundBatch = async () => {
      refused();
      throw new Error('temporal unavailable');
    };
    try {
      await smtp().sendMail({ from: 'claims@sender.example', to: `claimed@${DOMAIN}`, subject: 'claimed', text: 'x' });
      await startRefused;
    } finally {
      port.startInboundBatch = start;
    }
    const [row] = await core.db.select().from(schema.messages).where(eq(schema.messages.subject, 'claimed'));
    expect(row!.workflowId).toBeNull();
    const held = await core.inbound.prepareBatch('inbound-batch-test-a', [row!.id]);
    expect(held.map((m) => m.deliveryIds.length)).toEqual([1]);
    // Held by the batch: a run of its own (not handed over) and another batch leave it alone.
    expect((await core.inbound.prepareDeliveries(row!.id)).deliveryIds).toEqual([]);
    expect(await core.inbound.prepareBatch('inbound-batch-test-b', [row!.id])).toEqual([]);
    // The run the batch hands it to takes it over; from then on the batch's claim is gone.
    expect(
      (await core.inbound.prepareDeliveries(row!.id, { takeOverFrom: 'inbound-batch-test-a' })).deliveryIds,
    ).toEqual(held[0]!.deliveryIds);
    expect((await core.db.select().from(schema.messages).where(eq(schema.messages.id, row!.id)))[0]!.workflowId).toBe(
      `inbound-${row!.id}`,
    );
    expect(await core.inbound.prepareBatch('inbound-batch-test-a', [row!.id])).toEqual([]);
    // Its own run delivers it, once.
    const tc = await connectTemporal({
      address: stack.service.temporalAddress,
      namespace: 'default',
      taskQueue: stack.config.temporal.taskQueue,
    });
    try {
      await tc.client.workflow.start(inboundDeliveryWorkflow, {
        taskQueue: stack.config.temporal.taskQueue,
        workflowId: `inbound-${row!.id}`,
        args: [{ messageId: row!.id, retrySchedule: [300] }],
      });
    } finally {
      await tc.connection.close();
    }
    await hooks.waitFor('/claimed');
    const dlv = await eventually(async () => {
      const d = (await deliveriesOf(row!.id))[0];
      return d?.status === 'delivered' ? d : undefined;
    });
    expect(dlv.attempts).toBe(1);
    expect(hooks.hitsOn('/claimed')).toHaveLength(1);
  });

  it('ack mode without the acknowledgement fails (no-ack); a redirect fails too', async () => {
    await setHook('/noack', 'ack');
    hooks.on('/noack', () => ({ status: 200, body: '{"received":true}' }));
    await smtp().sendMail({ from: 'c@sender.example', to: `noack@${DOMAIN}`, subject: 'ack?', text: 'x' });
    const [first] = await hooks.waitFor('/noack', 4);
    const failed = await eventually(async () => {
      const d = (await deliveriesOf(first!.json.id))[0];
      return d?.status === 'failed' ? d : undefined;
    });
    expect(failed.attempts).toBe(4);
    const reasons = (await stack.api('GET', `/api/deliveries/${failed.id}/attempts`, { token })).body.attempts.map(
      (a: any) => a.reason,
    );
    expect(new Set(reasons)).toEqual(new Set(['no-ack']));

    await setHook('/acked', 'ack');
    hooks.on('/acked', () => ({ status: 200, body: 'fine', headers: { 'x-svc-ack': 'ok' } }));
    await smtp().sendMail({ from: 'c@sender.example', to: `acked@${DOMAIN}`, subject: 'ack header', text: 'x' });
    const [acked] = await hooks.waitFor('/acked');
    await eventually(async () => (await deliveriesOf(acked!.json.id))[0]?.status === 'delivered');

    await setHook('/redirect');
    hooks.on('/redirect', () => ({ status: 302, headers: { location: `${hooks.base}/hook` } }));
    await smtp().sendMail({ from: 'c@sender.example', to: `moved@${DOMAIN}`, subject: 'moved', text: 'x' });
    const [r] = await hooks.waitFor('/redirect');
    const d = await eventually(async () => {
      const x = (await deliveriesOf(r!.json.id))[0];
      return x?.status === 'failed' ? x : undefined;
    });
    const att = (await stack.api('GET', `/api/deliveries/${d.id}/attempts`, { token })).body.attempts;
    expect(att.at(-1)).toMatchObject({ ok: 0, reason: 'redirect', response_status: 302 });
    const dom = (await stack.api('GET', `/api/domains/${domainId}`, { token })).body.domain;
    expect(dom.webhookStatus.consecutiveFailures).toBeGreaterThan(0);
  });
});

describe('SMTP ingress', () => {
  it('refuses unknown domains with 550 and oversize messages with 552', async () => {
    await expect(
      smtp().sendMail({ from: 'x@sender.example', to: 'who@unknown.example', subject: 's', text: 't' }),
    ).rejects.toMatchObject({ responseCode: 550 });
    await expect(
      smtp().sendMail({ from: 'x@sender.example', to: `big@${DOMAIN}`, subject: 's', text: 'x'.repeat(300_000) }),
    ).rejects.toMatchObject({ responseCode: 552 });
  });

  it('offers STARTTLS and takes mail over it', async () => {
    await setHook('/tls');
    const t = nodemailer.createTransport({
      host: '127.0.0.1',
      port: stack.service.smtpPort!,
      secure: false,
      requireTLS: true,
      tls: { rejectUnauthorized: false },
    });
    const info = await t.sendMail({ from: 'tls@sender.example', to: `tls@${DOMAIN}`, subject: 'over tls', text: 'x' });
    expect(info.response).toMatch(/^250/);
    expect((await hooks.waitFor('/tls'))[0]!.json.subject).toBe('over tls');
  });

  it('a retried SMTP transaction (same bytes) never delivers twice', async () => {
    await setHook('/once');
    // Every run the two transactions start is recorded, so the test can wait for each one's result.
    const port = stack.service.core.workflows;
    const startBatch = port.startInboundBatch;
    const starts: { ids: string[]; started: Promise<void> }[] = [];
    port.startInboundBatch = (ids, account) => {
      const started = startBatch.call(port, ids, account);
      starts.push({ ids, started });
      return started;
    };
    const tc = await connectTemporal({
      address: stack.service.temporalAddress,
      namespace: 'default',
      taskQueue: stack.config.temporal.taskQueue,
    });
    try {
      const raw = `From: d@sender.example\r\nTo: once@${DOMAIN}\r\nSubject: once\r\nMessage-ID: <once-1@sender.example>\r\n\r\nbody\r\n`;
      const t = smtp();
      await t.sendMail({ envelope: { from: 'd@sender.example', to: [`once@${DOMAIN}`] }, raw });
      await t.sendMail({ envelope: { from: 'd@sender.example', to: [`once@${DOMAIN}`] }, raw });
      const [hit] = await hooks.waitFor('/once');
      const messageId = hit!.json.id as string;
      // Both transactions were accepted, so the message was handed to a run twice (maybe in one start): wait for
      // both hand-overs, then for the result of every run they started.
      const mine = await eventually(async () => {
        const found = starts.filter((s) => s.ids.includes(messageId));
        return found.flatMap((s) => s.ids).filter((id) => id === messageId).length === 2 ? found : undefined;
      });
      for (const s of mine) {
        await s.started;
        await tc.client.workflow.getHandle(inboundBatchWorkflowId(s.ids[0]!)).result();
      }
      // One message, one delivery row, delivered by one successful attempt, and one POST at the receiver.
      const db = stack.service.core.db;
      const rows = await db
        .select({ id: schema.messages.id })
        .from(schema.messages)
        .where(eq(schema.messages.subject, 'once'));
      expect(rows.map((r) => r.id)).toEqual([messageId]);
      const dlvs = await db.select().from(schema.deliveries).where(eq(schema.deliveries.messageId, messageId));
      expect(dlvs).toHaveLength(1);
      expect(dlvs[0]).toMatchObject({ status: 'delivered', attempts: 1 });
      const attempts = await db
        .select()
        .from(schema.deliveryAttempts)
        .where(eq(schema.deliveryAttempts.messageId, messageId));
      expect(attempts.map((a) => a.ok)).toEqual([1]);
      expect(hooks.hitsOn('/once')).toHaveLength(1);
    } finally {
      port.startInboundBatch = startBatch;
      await tc.connection.close();
    }
  });

  it('a bare LF before a dot does not split a message (no smuggling)', async () => {
    await setHook('/smuggle');
    const port = stack.service.smtpPort!;
    const lines = [
      'EHLO probe.example',
      `MAIL FROM:<e@sender.example>`,
      `RCPT TO:<smuggle@${DOMAIN}>`,
      'DATA',
      `From: e@sender.example\r\nTo: smuggle@${DOMAIN}\r\nSubject: outer\r\n\r\nfirst part\n.\nMAIL FROM:<evil@sender.example>\r\nRCPT TO:<smuggle@${DOMAIN}>\r\nDATA\r\nSubject: smuggled\r\n\r\nsecond\r\n.`,
      'QUIT',
    ];
    await new Promise<void>((resolve, reject) => {
      const s = connect(port, '127.0.0.1');
      let step = 0;
      s.on('data', (d) => {
        const text = d.toString();
        if (step < lines.length && /^(220|250|354)/m.test(text)) s.write(`${lines[step++]}\r\n`);
        if (/^221/m.test(text)) {
          s.end();
          resolve();
        }
      });
      s.on('error', reject);
    });
    const hits = await hooks.waitFor('/smuggle');
    // The 250 after DATA follows the commit, so the rows are all there by the 221: one message, and its one
    // delivery ends delivered by its first attempt (no retry could post it again afterwards).
    const rows = await stack.service.core.db
      .select({ id: schema.messages.id })
      .from(schema.messages)
      .where(inArray(schema.messages.subject, ['outer', 'smuggled']));
    expect(rows).toHaveLength(1);
    await eventually(async () => (await deliveriesOf(rows[0]!.id))[0]?.status === 'delivered');
    expect((await deliveriesOf(rows[0]!.id))[0]).toMatchObject({ status: 'delivered', attempts: 1 });
    expect(hooks.hitsOn('/smuggle')).toHaveLength(1);
    expect(hits[0]!.json.subject).toBe('outer');
    expect(hits[0]!.json.text).toContain('MAIL FROM:<evil@sender.example>');
  });
});
