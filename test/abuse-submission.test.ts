import { createConnection } from 'node:net';
import { and, count, eq } from 'drizzle-orm';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { schema } from '../db/index.js';
import { describeHealth, expectHealthUp, watchHealth } from './helpers/health-probe.js';
import { smtpData } from './helpers/hostile.js';
import { FROM_DOMAIN, startSendingStack, type SendingStack } from './helpers/sending.js';
import { eventually } from './helpers/stack.js';
import { authedSubmission, submissionClient, type SubmissionClient } from './helpers/submission-client.js';

/**
 * The submission server (smtp/submission.ts) under the hostile input the inbound ingress is tested with
 * (test/abuse-smtp.test.ts, test/abuse-hostile.test.ts): the connection guard, the size limit with the
 * rest drained, the recipient cap and the command rate against pipelining, nothing before AUTH and AUTH
 * only over TLS and counted by the login guard, and hostile MIME answered 5xx without a message row. Each
 * test with per-address state connects from its own loopback address (127.0.0.N), so the caps and the
 * login guard's row are the test's own. Health is probed from another process while the service is fed.
 */
const MiB = 1024 * 1024;
const LIMIT = 2 * MiB;
const PER_IP = 4;
const MAX_RCPTS = 3;
const COMMANDS = 40;
const MAX_FAILURES = 3;
const FROM = `hello@${FROM_DOMAIN}`;
const RCPT = 'someone@rcpt.test';

let env: SendingStack;
let userId: string;
const db = () => env.stack.service.core.db;
const port = () => env.stack.service.submissionPort!;
const tlsPort = () => env.stack.service.submissionsPort!;

beforeAll(async () => {
  env = await startSendingStack({
    env: {
      SMTP_MAX_MESSAGE_BYTES: String(LIMIT),
      SMTP_MAX_CLIENTS_PER_IP: String(PER_IP),
      SMTP_MAX_RECIPIENTS: String(MAX_RCPTS),
      SMTP_COMMANDS_PER_MINUTE: String(COMMANDS),
      LOGIN_MAX_FAILURES: String(MAX_FAILURES),
    },
  });
  const [user] = await db()
    .select({ id: schema.users.id })
    .from(schema.users)
    .where(eq(schema.users.email, 'sender@example.com'));
  userId = user!.id;
}, 120_000);
afterAll(async () => {
  await env?.stop();
});

/** Every client a test opened, closed after it (the per-address cap would count leftovers). */
const clients: SubmissionClient[] = [];
afterEach(async () => {
  const open = clients.splice(0);
  for (const c of open) c.close();
  await Promise.all(open.map((c) => c.untilClosed(5000).catch(() => undefined)));
});
const track = <T extends SubmissionClient>(c: T): T => {
  clients.push(c);
  return c;
};

/** The login guard's row for a client address (undefined before its first attempt). */
const guardRow = async (ip: string) =>
  (
    await db()
      .select({ count: schema.rateLimitWindows.count, last: schema.rateLimitWindows.windowStart })
      .from(schema.rateLimitWindows)
      .where(and(eq(schema.rateLimitWindows.name, 'mailbox_login'), eq(schema.rateLimitWindows.key, ip)))
  )[0];

/** The account's message rows. */
const messageRows = async () =>
  (await db().select({ n: count() }).from(schema.messages).where(eq(schema.messages.userId, userId)))[0]!.n;

/** An authenticated client with MAIL FROM and one RCPT TO accepted. */
async function envelope(from?: string) {
  const c = track(await authedSubmission(port(), env.key, { from }));
  expect(await c.command(`MAIL FROM:<${FROM}>`)).toMatchObject({ code: 250 });
  expect(await c.command(`RCPT TO:<${RCPT}>`)).toMatchObject({ code: 250 });
  return c;
}

/** Sends a whole message in one transaction; answers the reply to the end of DATA. */
async function submit(message: string | Buffer) {
  const c = await envelope();
  expect(await c.command('DATA')).toMatchObject({ code: 354 });
  await c.write(smtpData(Buffer.isBuffer(message) ? message : Buffer.from(message, 'latin1')));
  const answer = await c.reply(60_000);
  c.close();
  return answer;
}

describe('submission under abuse: connections', () => {
  it('caps connections per client address on both listeners; a freed slot is usable again; health stays fast', async () => {
    const health = await watchHealth(env.stack.baseUrl);
    for (const [p, implicitTls] of [
      [port(), false],
      [tlsPort(), true],
    ] as const) {
      // A flood of 25 connections at once from one address: PER_IP are greeted, every other one is refused.
      const flood = await Promise.all(
        Array.from({ length: 25 }, () =>
          submissionClient(p, { from: '127.0.0.4', implicitTls, waitGreeting: false }).then(track),
        ),
      );
      const greetings = await Promise.all(flood.map((c) => c.reply()));
      const codes = greetings.map((g) => g.code).sort();
      expect(codes, JSON.stringify(greetings)).toEqual([...Array(PER_IP).fill(220), ...Array(25 - PER_IP).fill(421)]);
      expect(greetings.filter((g) => g.code === 421).every((g) => g.text.startsWith('4.7.0 '))).toBe(true);
      // The refused ones are closed by the server.
      await Promise.all(flood.filter((_c, i) => greetings[i]!.code === 421).map((c) => c.untilClosed()));
      // Another address is not held up by the flood.
      const other = track(await submissionClient(p, { from: '127.0.0.5', implicitTls }));
      expect(await other.command('EHLO other.example')).toMatchObject({ code: 250 });
      // One greeted client leaves: its slot is usable again (the server sees the close asynchronously).
      const leaving = flood.find((_c, i) => greetings[i]!.code === 220)!;
      leaving.close();
      await leaving.untilClosed();
      const again = await eventually(async () => {
        const c = track(await submissionClient(p, { from: '127.0.0.4', implicitTls, waitGreeting: false }));
        return (await c.reply()).code === 220 ? c : undefined;
      });
      expect(await again.command('EHLO again.example')).toMatchObject({ code: 250 });
      for (const c of clients.splice(0)) c.close();
    }
    expectHealthUp(await health.stop());
  }, 60_000);

  it('counts a client address across both listeners: slots taken on STARTTLS are not offered again on implicit TLS', async () => {
    const held = await Promise.all(
      Array.from({ length: PER_IP }, () => submissionClient(port(), { from: '127.0.0.7' }).then(track)),
    );
    expect(held).toHaveLength(PER_IP);
    const extra = track(
      await submissionClient(tlsPort(), { from: '127.0.0.7', implicitTls: true, waitGreeting: false }),
    );
    expect(await extra.reply()).toMatchObject({ code: 421 });
    for (const c of clients.splice(0)) c.close();
  });
});

describe('submission under abuse: DATA', () => {
  it('an oversized DATA after AUTH is answered 552 5.3.4, the rest drained with memory bounded, and the session goes on', async () => {
    const before = await messageRows();
    const c = await envelope();
    expect(await c.command('DATA')).toMatchObject({ code: 354 });
    const baseline = process.memoryUsage().rss;
    let peak = baseline;
    const sampler = setInterval(() => {
      peak = Math.max(peak, process.memoryUsage().rss);
    }, 20);
    const health = await watchHealth(env.stack.baseUrl);
    const total = 128 * LIMIT; // 256 MiB against a 2 MiB limit
    const line = `${'x'.repeat(76)}\r\n`;
    const chunk = Buffer.from(line.repeat(Math.floor(MiB / line.length)));
    await c.write(`From: <${FROM}>\r\nTo: <${RCPT}>\r\nSubject: flood\r\n\r\n`);
    for (let sent = 0; sent < total && !c.closed; sent += chunk.length) await c.write(chunk);
    await c.write('\r\n.\r\n');
    const answer = await c.reply(60_000);
    clearInterval(sampler);
    const samples = await health.stop();
    console.info(
      `[submission oversized] ${answer.code} ${answer.text}; rss grew ${Math.round((peak - baseline) / 1e6)} MB; ${describeHealth(samples)}`,
    );
    expect(answer.code, answer.text).toBe(552);
    // What the process held for this client is bounded by the limit, not by the 256 MiB sent.
    expect(peak - baseline, `rss grew by ${Math.round((peak - baseline) / 1e6)} MB`).toBeLessThan(100 * MiB);
    expectHealthUp(samples, { minProbes: 2 });
    // The stream was drained in step: the same session can start a new transaction.
    expect(await c.command('RSET')).toMatchObject({ code: 250 });
    expect(await c.command(`MAIL FROM:<${FROM}>`)).toMatchObject({ code: 250 });
    expect(await messageRows()).toBe(before);
    // The answer carries its enhanced status code (smtp/replies.ts: message_too_large is 552 5.3.4).
    expect(answer.text).toMatch(/^5\.3\.4 /);
  }, 120_000);
});

describe('submission under abuse: pipelining', () => {
  it('hundreds of pipelined RCPT TO: 452 4.5.3 past SMTP_MAX_RECIPIENTS, then 421 and disconnect past the command rate', async () => {
    const c = track(await authedSubmission(port(), env.key));
    // Four commands so far (EHLO, STARTTLS, EHLO, AUTH); then MAIL and 300 RCPT in one write.
    const lines = [`MAIL FROM:<${FROM}>`, ...Array.from({ length: 300 }, (_, i) => `RCPT TO:<r${i}@rcpt.test>`)];
    c.socket.write(lines.map((l) => `${l}\r\n`).join(''));
    await c.untilClosed();
    const replies: { code: number; text: string }[] = [];
    while (c.buffered > 0) replies.push(await c.reply());
    const codes = replies.map((r) => r.code);
    const summary = codes.join(',');
    expect(codes.slice(0, 1 + MAX_RCPTS), summary).toEqual([250, ...Array(MAX_RCPTS).fill(250)]);
    const refused = replies.slice(1 + MAX_RCPTS, -1);
    expect(refused.length, summary).toBeGreaterThan(0);
    expect(
      refused.map((r) => r.code).every((code) => code === 452),
      summary,
    ).toBe(true);
    expect(replies.at(-1), summary).toMatchObject({ code: 421, text: expect.stringMatching(/^4\.7\.0 /) });
    // Bounded by the command rate: nothing near the 301 commands sent was answered.
    expect(replies.length, summary).toBeLessThanOrEqual(COMMANDS + 1);
    // Each refused RCPT carries its enhanced status code (RFC 3463 X.5.3, too many recipients).
    expect(refused[0]!.text, summary).toMatch(/^4\.5\.3 /);
  });

  it('a thousand pipelined NOOPs: 421 4.7.0 once past SMTP_COMMANDS_PER_MINUTE, then the connection is closed', async () => {
    const c = track(await authedSubmission(port(), env.key));
    c.socket.write('NOOP\r\n'.repeat(1000));
    await c.untilClosed();
    const replies: { code: number; text: string }[] = [];
    while (c.buffered > 0) replies.push(await c.reply());
    const summary = replies.map((r) => r.code).join(',');
    expect(replies.at(-1), summary).toMatchObject({ code: 421, text: expect.stringMatching(/^4\.7\.0 /) });
    expect(
      replies.slice(0, -1).every((r) => r.code === 250),
      summary,
    ).toBe(true);
    expect(replies.length, summary).toBeLessThanOrEqual(COMMANDS + 1);
  });
});

describe('submission under abuse: nothing without AUTH', () => {
  it('MAIL FROM before AUTH is 530, in clear and over TLS', async () => {
    const clear = track(await submissionClient(port()));
    expect(await clear.command('EHLO app.example')).toMatchObject({ code: 250 });
    expect(await clear.command(`MAIL FROM:<${FROM}>`)).toMatchObject({ code: 530 });
    const tls = track(await authedSubmission(port()));
    expect(await tls.command(`MAIL FROM:<${FROM}>`)).toMatchObject({ code: 530 });
    expect(await tls.command(`RCPT TO:<${RCPT}>`)).toMatchObject({ code: 530 });
    expect(await tls.command('DATA')).toMatchObject({ code: 530 });
    const implicit = track(await submissionClient(tlsPort(), { implicitTls: true }));
    expect(await implicit.command('EHLO app.example')).toMatchObject({ code: 250 });
    expect(await implicit.command(`MAIL FROM:<${FROM}>`)).toMatchObject({ code: 530 });
  });

  it('AUTH in clear is refused 538 and the password is never checked: the login guard does not move', async () => {
    const ip = '127.0.0.3';
    expect(await guardRow(ip)).toBeUndefined();
    const c = track(await submissionClient(port(), { from: ip }));
    expect(await c.command('EHLO app.example')).toMatchObject({ code: 250 });
    // The right key, a wrong one, and AUTH LOGIN: all refused before any secret is read.
    expect(await c.authPlain(env.key)).toMatchObject({ code: 538 });
    expect(await c.authPlain('svc_live_wrong')).toMatchObject({ code: 538 });
    expect(await c.command('AUTH LOGIN')).toMatchObject({ code: 538 });
    expect(await c.command(`MAIL FROM:<${FROM}>`)).toMatchObject({ code: 530 });
    // The guard counts before it checks a secret: no row means no secret was looked at.
    expect(await guardRow(ip)).toBeUndefined();
    // Over TLS the same address is counted (a failure), which shows the row would have moved.
    const tls = track(await authedSubmission(port(), undefined, { from: ip }));
    expect(await tls.authPlain('svc_live_wrong')).toMatchObject({ code: 535 });
    expect(await guardRow(ip)).toMatchObject({ count: 1 });
  });

  it('a TCP probe that closes before the TLS handshake (a port scan, a load balancer check) leaves the listener serving', async () => {
    for (let i = 0; i < 5; i++) {
      const probe = createConnection({ host: '127.0.0.1', port: tlsPort(), localAddress: '127.0.0.9' });
      await new Promise<void>((resolve, reject) => probe.once('connect', resolve).once('error', reject));
      probe.destroy();
    }
    // Without a listener for the server's 'error', the first probe's failure would have ended this process.
    const c = track(await submissionClient(tlsPort(), { from: '127.0.0.9', implicitTls: true }));
    expect(await c.command('EHLO after.example')).toMatchObject({ code: 250 });
    for (const x of clients.splice(0)) x.close();
  });

  it('an application opening its pool at once logs in on every connection (more than LOGIN_MAX_FAILURES at a time)', async () => {
    const ip = '127.0.0.8';
    expect(PER_IP).toBeGreaterThan(MAX_FAILURES);
    const pool = await Promise.all(
      Array.from({ length: PER_IP }, () => authedSubmission(port(), env.key, { from: ip }).then(track)),
    );
    expect(pool).toHaveLength(PER_IP); // authedSubmission throws unless AUTH answered 235
    expect(await guardRow(ip)).toBeUndefined(); // nothing counted against the address
    for (const c of clients.splice(0)) c.close();
  });

  it('a wrong password is 535 5.7.8 and counted; after LOGIN_MAX_FAILURES the address is locked (454 4.7.0) even for the right key', async () => {
    const ip = '127.0.0.2';
    const c = track(await authedSubmission(port(), undefined, { from: ip }));
    const wrong = ['svc_live_not_a_key', 'hunter2', `${env.key}x`];
    for (const [i, secret] of wrong.entries()) {
      const r = await c.authPlain(secret);
      expect(r.code, r.text).toBe(535);
      expect(r.text).toMatch(/^5\.7\.8 /);
      expect(await guardRow(ip)).toMatchObject({ count: i + 1 });
    }
    expect(wrong).toHaveLength(MAX_FAILURES);
    const locked = await c.authPlain(env.key);
    expect(locked.code, locked.text).toBe(454);
    expect(locked.text).toMatch(/^4\.7\.0 /);
    // AUTH LOGIN, on a new connection and on the implicit-TLS port: still locked.
    const login = track(await authedSubmission(port(), undefined, { from: ip }));
    expect(await login.command('AUTH LOGIN')).toMatchObject({ code: 334 });
    expect(await login.command(Buffer.from('app').toString('base64'))).toMatchObject({ code: 334 });
    expect(await login.command(Buffer.from(env.key).toString('base64'))).toMatchObject({ code: 454 });
    const implicit = track(await submissionClient(tlsPort(), { from: ip, implicitTls: true }));
    expect(await implicit.command('EHLO app.example')).toMatchObject({ code: 250 });
    expect(await implicit.authPlain(env.key)).toMatchObject({ code: 454 });
    expect(await c.command(`MAIL FROM:<${FROM}>`)).toMatchObject({ code: 530 });
    // The lock is the address's: the right key from another address still logs in.
    const other = track(await authedSubmission(port(), env.key, { from: '127.0.0.6' }));
    expect(await other.command(`MAIL FROM:<${FROM}>`)).toMatchObject({ code: 250 });
  });
});

/** The first headers of a message from the account's domain to the sink. */
const head = `From: <${FROM}>\r\nTo: <${RCPT}>\r\nSubject: hostile\r\n`;
/** A multipart message with `n` small attachments. */
function attachmentParts(n: number): string {
  const parts = Array.from(
    { length: n },
    (_, i) =>
      `--p\r\nContent-Type: application/octet-stream\r\nContent-Disposition: attachment; filename="f${i}.bin"\r\n\r\nx${i}\r\n`,
  );
  return `${head}MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary="p"\r\n\r\n--p\r\nContent-Type: text/plain\r\n\r\nbody\r\n${parts.join('')}--p--\r\n`;
}
/** A message whose Subject is `n` characters long (one header line). */
const subjectOf = (n: number) => `From: <${FROM}>\r\nTo: <${RCPT}>\r\nSubject: ${'a'.repeat(n)}\r\n\r\nbody\r\n`;

const HOSTILE: [string, () => string][] = [
  [
    'multipart nested 1,000 deep',
    () => {
      let open = '';
      let close = '';
      for (let i = 1; i <= 1000; i++) {
        open += `Content-Type: multipart/mixed; boundary="b${i}"\r\n\r\n--b${i}\r\n`;
        close = `\r\n--b${i}--\r\n${close}`;
      }
      return `${head}MIME-Version: 1.0\r\n${open}Content-Type: text/plain\r\n\r\ndeep${close}`;
    },
  ],
  [
    'a header block past the parser limit (1.1 MiB of folded header)',
    () => `${head}X-Long: ${`${'a'.repeat(76)}\r\n `.repeat(Math.ceil((1.1 * MiB) / 79))}end\r\n\r\nbody\r\n`,
  ],
  ['5,000 attachment parts', () => attachmentParts(5000)],
  [
    '10,000 distinct header fields',
    () => `${head}${Array.from({ length: 10_000 }, (_, i) => `X-Hostile-${i}: value\r\n`).join('')}\r\nbody\r\n`,
  ],
  ['a 1 MiB Subject (past the header limit)', () => subjectOf(MiB)],
  ['no From header and no envelope sender', () => `To: <${RCPT}>\r\nSubject: anonymous\r\n\r\nbody\r\n`],
];

describe('submission under abuse: hostile messages', () => {
  it('a well-formed message is accepted and leaves its message row (the control for the cases below)', async () => {
    const before = await messageRows();
    const answer = await submit(`${head}\r\nhello\r\n`);
    expect(answer.code, answer.text).toBe(250);
    expect(await messageRows()).toBe(before + 1);
  });

  it.each(HOSTILE)(
    '%s: answered 5xx, no message row, health stays fast',
    (name, build) => refused(name, build()),
    90_000,
  );
});

/**
 * What POST /v1/send refuses (api/ops/send.ts: at most 20 attachments, a Subject of at most 998
 * characters) must not pass by submission either: the same send, by another door. Last in the file: a
 * case the server accepts starts a delivery, whose work should not fall in another test's probed window.
 */
describe('submission under abuse: the API bounds of a send', () => {
  it.each([
    ["990 attachment parts (under the parser's 1,000 nodes; the API takes 20)", () => attachmentParts(990)],
    ['a 512 KiB Subject (under the header limit; the API takes 998 characters)', () => subjectOf(512 * 1024)],
  ] as [string, () => string][])(
    '%s: answered 5xx, no message row, health stays fast',
    (name, build) => refused(name, build()),
    90_000,
  );
});

/** Submits `message` (under the size limit) and expects a 5xx, no message row, health up, the session in step. */
async function refused(name: string, message: string) {
  expect(message.length).toBeLessThan(LIMIT);
  const before = await messageRows();
  const health = await watchHealth(env.stack.baseUrl);
  const c = await envelope();
  // The sender-less case sends MAIL FROM:<> (RSET first, then the same recipient).
  if (!message.startsWith('From:')) {
    expect(await c.command('RSET')).toMatchObject({ code: 250 });
    expect(await c.command('MAIL FROM:<>')).toMatchObject({ code: 250 });
    expect(await c.command(`RCPT TO:<${RCPT}>`)).toMatchObject({ code: 250 });
  }
  expect(await c.command('DATA')).toMatchObject({ code: 354 });
  await c.write(smtpData(Buffer.from(message, 'latin1')));
  const answer = await c.reply(60_000);
  const samples = await health.stop();
  console.info(`[submission hostile] ${name}: ${answer.code} ${answer.text.slice(0, 160)}`);
  expect(answer.code, `${answer.code} ${answer.text}\n${describeHealth(samples)}`).toBeGreaterThanOrEqual(500);
  expect(answer.code).toBeLessThan(600);
  expect(await messageRows()).toBe(before);
  expectHealthUp(samples, { minProbes: 1 });
  // The session is still in step after the refusal.
  expect(await c.command('NOOP')).toMatchObject({ code: 250 });
}
