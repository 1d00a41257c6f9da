import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { eq } from 'drizzle-orm';
import nodemailer from 'nodemailer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schema } from '../db/index.js';
import { createRspamdClient } from '../core/spam/rspamd.js';
import { registry } from '../core/metrics.js';
import { startTestDns } from './helpers/dns.js';
import { startTestRspamd } from './helpers/rspamd.js';
import { eventually, startStack, type TestStack } from './helpers/stack.js';
import { checkPublishedSchema, startWebhookReceiver } from './helpers/webhook-receiver.js';

const SERVICE = 'spam.svc.test';
const DOMAIN = `inbox.${SERVICE}`;
// The GTUBE test string (split so this file is not itself a GTUBE message).
const GTUBE = ['XJS*C4JDBQADN1.NSBN3*2IDNEN*GTUBE', '-STANDARD-ANTI-UBE-TEST-EMAIL*C.34X'].join('');

let stack: TestStack;
let dns: Awaited<ReturnType<typeof startTestDns>>;
let rspamd: Awaited<ReturnType<typeof startTestRspamd>>;
let hooks: Awaited<ReturnType<typeof startWebhookReceiver>>;
let token: string;
let domainId: string;

beforeAll(async () => {
  dns = await startTestDns();
  [rspamd, hooks] = await Promise.all([startTestRspamd({ nameserver: dns.server.address }), startWebhookReceiver()]);
  stack = await startStack({
    SERVICE_DOMAIN: SERVICE,
    DNS_SERVERS: dns.server.address,
    RSPAMD_URL: rspamd.url,
    // Generous: the suite runs two files at a time on two cores; the timeout case has its own test below.
    RSPAMD_TIMEOUT_MS: '15000',
  });
  token = (
    await stack.api('POST', '/api/auth/signup', { body: { email: 'spam@example.com', password: 'spam password 1' } })
  ).body.token;
  domainId = (await stack.api('POST', '/api/domains/subdomain', { token, body: { subdomain: 'inbox' } })).body.domain
    .id;
  const res = await stack.api('PUT', `/api/domains/${domainId}/webhook`, {
    token,
    body: { url: `${hooks.base}/spam`, ackMode: 'lenient' },
  });
  expect(res.status).toBe(200);
  hooks.secret('/spam', res.body.signingSecret);
});
afterAll(async () => {
  await stack?.stop();
  await rspamd?.stop();
  await hooks?.close();
  await dns?.close();
});

const send = (subject: string, text: string, headers: Record<string, string> = {}) =>
  nodemailer
    .createTransport({ host: '127.0.0.1', port: stack.service.smtpPort!, secure: false, ignoreTLS: true })
    .sendMail({ from: 'Alice <alice@sender.example>', to: `hello@${DOMAIN}`, subject, text, headers });

/** The webhook payload of the message with this subject. */
const payloadOf = async (subject: string) =>
  (await eventually(async () => hooks.hits.find((h) => h.path === '/spam' && h.json?.subject === subject)))!.json;

/** The mailbox copy of a message, as IMAP and the mailbox API serve it. */
async function mailboxCopy(messageId: string): Promise<string> {
  const db = stack.service.core.db;
  const [row] = await db
    .select({ raw: schema.mailboxBodies.raw })
    .from(schema.mailboxMessages)
    .innerJoin(schema.mailboxBodies, eq(schema.mailboxBodies.id, schema.mailboxMessages.bodyId))
    .where(eq(schema.mailboxMessages.messageId, messageId));
  return Buffer.from(row!.raw).toString('latin1');
}

describe('rspamd scores inbound mail', () => {
  it('GTUBE: rspamd answers reject; the verdict is on the payload, the message and the mailbox copy', async () => {
    await send('GTUBE inside', `This is the GTUBE test string:\n${GTUBE}\n`);
    const p = await payloadOf('GTUBE inside');
    expect(checkPublishedSchema(p)).toBeUndefined();
    expect(p.spam).toMatchObject({ scored: true, action: 'reject' });
    expect(p.spam.symbols.map((s: { name: string }) => s.name)).toContain('GTUBE');
    expect(p.auth.spam).toBe('reject');

    const detail = (await stack.api('GET', `/api/messages/${p.id}`, { token })).body.message;
    expect(detail.spam).toEqual(p.spam);
    const listed = (await stack.api('GET', '/api/messages?direction=inbound', { token })).body;
    expect(listed.find((m: { id: string }) => m.id === p.id).spam).toEqual(p.spam);

    const copy = await mailboxCopy(p.id);
    expect(copy.startsWith(`X-Spam-Score: ${p.spam.score} / ${p.spam.required}\r\nX-Spam-Action: reject\r\n`)).toBe(
      true,
    );
    expect(copy).toMatch(/^X-Spam-Symbols:.*GTUBE\(0\)/m);
  });

  it('a plain message scores low, and a sender cannot write its own X-Spam-* headers', async () => {
    await send('Lunch on Thursday', 'Hi Bob, are we still on for lunch on Thursday at noon?\nAlice', {
      'X-Spam-Score': '-100',
      'X-Spam-Action': 'no action',
    });
    const p = await payloadOf('Lunch on Thursday');
    expect(checkPublishedSchema(p)).toBeUndefined();
    expect(p.spam).toMatchObject({ scored: true, action: 'no action' });
    expect(p.spam.score).toBeLessThan(p.spam.required);
    expect(p.spam.score).toBeLessThan(4);
    expect(p.auth.spam).toBe('no action');
    const copy = await mailboxCopy(p.id);
    expect(copy).toContain(`X-Spam-Score: ${p.spam.score} / ${p.spam.required}\r\n`);
    expect(copy).not.toContain('-100');
    expect(copy.match(/^X-Spam-Action:/gim)).toHaveLength(1);
  });

  it("GTUBE is held, then refused, as the domain's thresholds say; each scan and decision is counted", async () => {
    const counted = async (name: string, labels: Record<string, string>) => {
      const metric = (await registry.getMetricsAsJSON()).find((m) => m.name === name);
      const values = (metric?.values ?? []) as { value: number; labels: Record<string, string | number> }[];
      return values.find((v) => Object.entries(labels).every(([k, x]) => v.labels[k] === x))?.value ?? 0;
    };
    const setPolicy = (body: Record<string, unknown>) =>
      stack.api('PATCH', `/api/domains/${domainId}/inbound-policy`, { token, body });
    const heldBefore = await counted('svc_inbound_policy_outcomes_total', { outcome: 'held' });
    const refusedBefore = await counted('svc_inbound_policy_outcomes_total', { outcome: 'refused' });
    const rejectsBefore = await counted('svc_spam_scans_total', { result: 'scored', action: 'reject' });

    // Hold at 6 (rspamd answers GTUBE `reject`: it counts as at least rspamd's required score, 15 by default).
    expect((await setPolicy({ spam_hold_score: 6, spam_refuse_score: null })).status).toBe(200);
    await send('GTUBE held', `Held:\n${GTUBE}\n`);
    const held = await eventually(async () => {
      const list = (await stack.api('GET', '/api/inbound/held', { token })).body.data;
      return list.find((m: { subject: string }) => m.subject === 'GTUBE held');
    });
    expect(held.spam).toMatchObject({ scored: true, action: 'reject' });
    expect(held.held_reason).toContain('at or above 6');
    expect(hooks.hits.some((h) => h.json?.subject === 'GTUBE held')).toBe(false);

    // Refuse at 10: the sending server is answered 550 5.7.1 at the end of DATA, and nothing is stored.
    expect((await setPolicy({ spam_refuse_score: 10 })).status).toBe(200);
    const refused = await send('GTUBE refused', `Refused:\n${GTUBE}\n`).then(
      () => undefined,
      (err: { responseCode?: number; response?: string }) => err,
    );
    expect(refused?.responseCode).toBe(550);
    expect(refused?.response).toContain('5.7.1');
    const listed = (await stack.api('GET', '/api/messages?direction=inbound', { token })).body;
    expect(listed.some((m: { subject: string | null }) => m.subject === 'GTUBE refused')).toBe(false);

    // A plain message below both thresholds is still delivered.
    await send('Plain under thresholds', 'Nothing to see here, just a note about Thursday.');
    expect((await payloadOf('Plain under thresholds')).spam).toMatchObject({ scored: true, action: 'no action' });

    expect(await counted('svc_inbound_policy_outcomes_total', { outcome: 'held' })).toBe(heldBefore + 1);
    expect(await counted('svc_inbound_policy_outcomes_total', { outcome: 'refused' })).toBe(refusedBefore + 1);
    expect(await counted('svc_spam_scans_total', { result: 'scored', action: 'reject' })).toBe(rejectsBefore + 2);
    expect((await setPolicy({ spam_hold_score: null, spam_refuse_score: null })).status).toBe(200);
  });

  it('rspamd that does not answer in time: the client says timeout', async () => {
    // A peer that takes the request and never answers.
    const silent: Server = createServer(() => undefined);
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    try {
      const client = createRspamdClient({
        url: `http://127.0.0.1:${(silent.address() as AddressInfo).port}`,
        timeoutMs: 300,
      });
      const started = Date.now();
      const v = await client.check(Buffer.from('Subject: x\r\n\r\nbody\r\n'), {
        ip: '127.0.0.1',
        from: 'a@b.example',
        rcpts: ['c@d.example'],
        helo: 'b.example',
      });
      expect(v).toEqual({ scored: false, reason: 'timeout' });
      expect(Date.now() - started).toBeLessThan(5000);
    } finally {
      silent.closeAllConnections();
      await new Promise((r) => silent.close(r));
    }
  });

  it('rspamd stopped: the message is still delivered, marked unscored with the reason', async () => {
    await rspamd.stop();
    await send('While rspamd is down', 'Still here.');
    const p = await payloadOf('While rspamd is down');
    expect(checkPublishedSchema(p)).toBeUndefined();
    expect(p.spam).toEqual({ scored: false, reason: 'unreachable' });
    expect(p.auth.spam).toBeNull();
    const detail = (await stack.api('GET', `/api/messages/${p.id}`, { token })).body;
    expect(detail.message.spam).toEqual({ scored: false, reason: 'unreachable' });
    const delivered = await eventually(async () => {
      const d = (await stack.api('GET', `/api/messages/${p.id}`, { token })).body.deliveries[0];
      return d?.status === 'delivered' ? d : undefined;
    });
    expect(delivered.attempts).toBe(1);
    const copy = await mailboxCopy(p.id);
    expect(copy.startsWith('X-Spam-Status: unscored (unreachable)\r\n')).toBe(true);
  });
});
