import { eq } from 'drizzle-orm';
import { simpleParser } from 'mailparser';
import nodemailer from 'nodemailer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schema } from '../db/index.js';
import { FROM_DOMAIN, SERVICE, startSendingStack, type SendingStack } from './helpers/sending.js';
import { metric, scrape, type Scrape } from './helpers/metrics.js';
import { eventually, type TestStack } from './helpers/stack.js';

/**
 * GET /api/metrics on a real stack: mail sent to a loopback MX that refuses one address (a synchronous bounce)
 * and defers another once, a DSN and an ARF complaint sent over SMTP to the return paths, an open of the
 * tracking pixel. The answer counts exactly that, per account and per domain, by day and by hour; another
 * account's domain and another domain's scoped key are 404.
 */
let env: SendingStack;
let stack: TestStack;
let deferredOnce = false;
let acmeId: string;
let betaId: string;
let otherDomainId: string;
let otherSession: string;
let betaKey: string;
let before: Scrape;
const OPERATOR_TOKEN = 'activity-metrics-operator-token-0123456789';
const prometheus = () => scrape(`${stack.baseUrl}/metrics`, OPERATOR_TOKEN);

const get = (query: string, token = env.session) => stack.api('GET', `/api/metrics${query}`, { token });
const row = async (id: string) =>
  (await stack.service.core.db.select().from(schema.messages).where(eq(schema.messages.id, id)))[0]!;
const received = (address: string) => env.sink.waitFor((r) => r.to.includes(address));
const eventsOf = async (id: string) =>
  ((await stack.api('GET', `/api/events?messageId=${id}`, { token: env.session })).body as { type: string }[]).map(
    (e) => e.type,
  );
/** Sends and waits until the message has its outcome (sent or bounced) and its events. */
async function sendAndSettle(body: Record<string, unknown>, wanted: string, from?: string): Promise<string> {
  const res = await env.send(from ? { ...body, from } : body);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  const id = res.body.id as string;
  await eventually(async () => ['sent', 'bounced'].includes((await row(id)).status));
  await eventually(async () => (await eventsOf(id)).includes(wanted), 20_000);
  return id;
}

/** A report over SMTP to the service's ingress, at the message's return path, as a receiving server sends one. */
async function report(id: string, type: string, machine: string, fields: string, original: Buffer) {
  const boundary = `report-${type}`;
  const returnPath = `bounce+${id}@bounces.${FROM_DOMAIN}`;
  const raw = [
    'From: MAILER-DAEMON@mx.rcpt.test',
    `To: ${returnPath}`,
    'Subject: Report',
    'MIME-Version: 1.0',
    `Content-Type: multipart/report; report-type=${type}; boundary="${boundary}"`,
    '',
    `--${boundary}`,
    'Content-Type: text/plain',
    '',
    'This is an automatically generated report.',
    `--${boundary}`,
    `Content-Type: ${machine}`,
    '',
    fields,
    `--${boundary}`,
    'Content-Type: message/rfc822',
    '',
    original.toString('utf8'),
    `--${boundary}--`,
    '',
  ].join('\r\n');
  const t = nodemailer.createTransport({
    host: '127.0.0.1',
    port: stack.service.smtpPort!,
    secure: false,
    ignoreTLS: true,
  });
  await t.sendMail({ envelope: { from: '', to: [returnPath] }, raw });
  t.close();
}

beforeAll(async () => {
  env = await startSendingStack({
    onRcpt: (address) => {
      if (address.startsWith('gone')) return { code: 550, message: '5.1.1 No such user here' };
      if (address.startsWith('slow') && !deferredOnce) {
        deferredOnce = true;
        return { code: 451, message: '4.3.0 Try again later' };
      }
      return undefined;
    },
    env: { OPERATOR_TOKEN },
  });
  stack = env.stack;
  before = await prometheus();
  acmeId = (await stack.service.core.db.select().from(schema.domains).where(eq(schema.domains.domain, FROM_DOMAIN)))[0]!
    .id;
  betaId = (await stack.api('POST', '/api/domains/subdomain', { token: env.session, body: { subdomain: 'beta' } })).body
    .domain.id;
  betaKey = (await stack.api('POST', '/api/keys/scoped', { token: env.session, body: { domainId: betaId } })).body.key;
  const other = (
    await stack.api('POST', '/api/auth/signup', { body: { email: 'other@example.com', password: 'other password' } })
  ).body;
  otherSession = other.token;
  await stack.service.core.db
    .update(schema.users)
    .set({ emailVerified: true })
    .where(eq(schema.users.id, other.user.id));
  otherDomainId = (
    await stack.api('POST', '/api/domains/subdomain', { token: otherSession, body: { subdomain: 'other' } })
  ).body.domain.id;
});
afterAll(async () => {
  await env?.stop();
});

const EXPECTED_ACME = {
  sent: 7,
  delivered: 6,
  deferred: 1,
  bounced: 2,
  complained: 1,
  opened: 1,
  clicked: 0,
  bounced_by_class: { invalid_recipient: 1, mailbox_full: 1 },
};
const sum = (series: any[], k: string) => series.reduce((n, b) => n + b[k], 0);

describe('GET /api/metrics', () => {
  it('counts what was sent, delivered, deferred, bounced, complained and opened', async () => {
    await sendAndSettle({ to: ['ok1@rcpt.test', 'ok2@rcpt.test'] }, 'email.sent');
    await sendAndSettle({ to: 'gone@rcpt.test' }, 'email.bounced');
    await sendAndSettle({ to: 'slow@rcpt.test' }, 'email.sent');
    const opened = await sendAndSettle(
      { to: 'reader@rcpt.test', html: '<p>Hello</p>', trackOpens: true },
      'email.sent',
    );
    const pixel = /src="([^"]+\/t\/o\/[^"]+)"/.exec(
      (await simpleParser((await received('reader@rcpt.test')).raw)).html || '',
    );
    const gif = await fetch(`${stack.baseUrl}${pixel![1]!.replace(/&amp;/g, '&').replace(stack.config.publicUrl, '')}`);
    expect(gif.headers.get('content-type')).toBe('image/gif');
    await eventually(async () => (await eventsOf(opened)).includes('email.opened'));

    const angry = await sendAndSettle({ to: 'angry@rcpt.test' }, 'email.sent');
    await report(
      angry,
      'feedback-report',
      'message/feedback-report',
      'Feedback-Type: abuse\r\nUser-Agent: SomeISP-FBL/1.0\r\nVersion: 1\r\nOriginal-Rcpt-To: angry@rcpt.test\r\n',
      (await received('angry@rcpt.test')).raw,
    );
    await eventually(async () => (await eventsOf(angry)).includes('email.complained'));

    const full = await sendAndSettle({ to: 'full@rcpt.test' }, 'email.sent');
    await report(
      full,
      'delivery-status',
      'message/delivery-status',
      'Reporting-MTA: dns; mx.rcpt.test\r\n\r\nFinal-Recipient: rfc822; full@rcpt.test\r\nAction: failed\r\nStatus: 5.2.2\r\nDiagnostic-Code: smtp; 552 5.2.2 Mailbox full\r\n',
      (await received('full@rcpt.test')).raw,
    );
    await eventually(async () => (await eventsOf(full)).includes('email.bounced'));
    // The other domain of the account, and the other account: counted apart.
    await sendAndSettle({ to: 'b1@rcpt.test' }, 'email.sent', `hello@beta.${SERVICE}`);
    const theirs = await env.send(
      { to: 'theirs@rcpt.test', from: `x@other.${SERVICE}` },
      (await stack.api('GET', '/api/keys', { token: otherSession })).body.key,
    );
    expect(theirs.status).toBe(200);
    await eventually(async () => (await row(theirs.body.id)).status === 'sent');

    const acme = await get(`?domain_id=${acmeId}`);
    expect(acme.status).toBe(200);
    expect(acme.body).toMatchObject({ period: 'day', domain_id: acmeId, totals: EXPECTED_ACME });
    expect(acme.body.series).toHaveLength(30);
    const today = Math.floor(Date.now() / 86_400_000) * 86_400_000;
    expect(acme.body.series.at(-1)).toEqual({ t: today, ...EXPECTED_ACME });
    expect(acme.body.series.slice(0, -1).every((b: any) => b.sent === 0 && b.bounced === 0)).toBe(true);
    expect(acme.body.to).toBe(today + 86_400_000);
    expect(acme.body.from).toBe(today - 29 * 86_400_000);

    const account = await get('');
    expect(account.body).toMatchObject({
      domain_id: null,
      totals: { ...EXPECTED_ACME, sent: 8, delivered: 7 },
    });
    // Prometheus counts the same complaint and bounces, with bounded labels (no account, no domain).
    const after = await prometheus();
    const delta = (name: string, labels: Record<string, string>) =>
      metric(after, name, labels) - metric(before, name, labels);
    expect(delta('svc_complaints_total', { feedback_type: 'abuse' })).toBe(1);
    expect(delta('svc_bounces_total', { kind: 'sync', class: 'invalid_recipient' })).toBe(1);
    expect(delta('svc_bounces_total', { kind: 'async', class: 'mailbox_full' })).toBe(1);
    const theirsAnswer = await get('', otherSession);
    expect(theirsAnswer.body.totals).toMatchObject({ sent: 1, delivered: 1, bounced: 0, complained: 0, opened: 0 });
  });

  it('answers the same counts by hour, every bucket present and aligned', async () => {
    const hourly = await get(`?period=hour&domain_id=${acmeId}`);
    expect(hourly.status).toBe(200);
    expect(hourly.body.totals).toEqual(EXPECTED_ACME);
    expect(hourly.body.series).toHaveLength(48);
    for (const k of ['sent', 'delivered', 'deferred', 'bounced', 'complained', 'opened'])
      expect(sum(hourly.body.series, k), k).toBe((EXPECTED_ACME as any)[k]);
    const ts = hourly.body.series.map((b: any) => b.t);
    expect(ts.every((t: number, i: number) => t % 3_600_000 === 0 && (i === 0 || t - ts[i - 1] === 3_600_000))).toBe(
      true,
    );
    // A range before any mail: zeros in every bucket of it.
    const now = Date.now();
    const past = await get(`?period=day&from=${now - 10 * 86_400_000}&to=${now - 5 * 86_400_000}&domain_id=${acmeId}`);
    expect(past.body.series).toHaveLength(6);
    expect(past.body.totals).toMatchObject({ sent: 0, delivered: 0, bounced: 0, bounced_by_class: {} });
    // Bounded: 2,001 hours is refused; to before from too.
    expect((await get(`?period=hour&from=${now - 2001 * 3_600_000}&to=${now}`)).status).toBe(400);
    expect((await get(`?from=${now}&to=${now - 86_400_000}`)).status).toBe(400);
    expect((await get('?period=week')).status).toBe(400);
  });

  it("keeps tenants apart: another account's domain and another domain's scoped key are 404", async () => {
    expect((await get(`?domain_id=${otherDomainId}`)).status).toBe(404);
    expect((await get(`?domain_id=${acmeId}`, otherSession)).status).toBe(404);
    expect((await get(`?domain_id=${acmeId}`, betaKey)).status).toBe(404);
    const scoped = await get('', betaKey);
    expect(scoped.status).toBe(200);
    expect(scoped.body).toMatchObject({ domain_id: betaId, totals: { sent: 1, delivered: 1, bounced: 0 } });
    expect((await get(`?domain_id=${betaId}`, betaKey)).body.totals).toEqual(scoped.body.totals);
    // The account key and tRPC answer the same figures as the session.
    expect((await get(`?domain_id=${acmeId}`, env.key)).body.totals).toEqual(EXPECTED_ACME);
    const input = encodeURIComponent(JSON.stringify({ domain_id: acmeId }));
    const trpc = await stack.api('GET', `/trpc/metrics.get?input=${input}`, { token: env.session });
    expect(trpc.body.result.data.totals).toEqual(EXPECTED_ACME);
    expect((await get('', 'svc_live_not_a_key')).status).toBe(401);
  });
});
