import { spawn } from 'node:child_process';
import type { Socket } from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { expectHealthUp, watchHealth } from './helpers/health-probe.js';
import { rawSmtp } from './helpers/smtp-client.js';
import { startStack, type TestStack } from './helpers/stack.js';

const SERVICE = 'abuse.svc.test';
const DOMAIN = `inbox.${SERVICE}`;
const LIMIT = 5 * 1024 * 1024;
let stack: TestStack;

beforeAll(async () => {
  stack = await startStack({
    SERVICE_DOMAIN: SERVICE,
    SMTP_MAX_MESSAGE_BYTES: String(LIMIT),
    SMTP_MAX_CLIENTS_PER_IP: '4',
    SMTP_MAX_RECIPIENTS: '3',
    SMTP_COMMANDS_PER_MINUTE: '40',
  });
  const token = (
    await stack.api('POST', '/api/auth/signup', {
      body: { email: 'abuse-smtp@example.com', password: 'abuse smtp password' },
    })
  ).body.token;
  expect((await stack.api('POST', '/api/domains/subdomain', { token, body: { subdomain: 'inbox' } })).status).toBe(201);
});
afterAll(async () => {
  await stack?.stop();
});

const port = () => stack.service.smtpPort!;

/** Every raw client a test opened, closed after it (the per-IP cap would count leftovers). */
const clients: { close(): void; closed: boolean; socket: Socket }[] = [];
afterEach(async () => {
  const open = clients.splice(0).filter((c) => !c.closed);
  for (const c of open) c.close();
  await Promise.all(
    open.map((c) => new Promise((r) => (c.socket.destroyed && c.closed ? r(undefined) : c.socket.once('close', r)))),
  );
  await new Promise((r) => setTimeout(r, 50)); // the server's onClose runs on the next tick
});

async function envelope(rcpt = `someone@${DOMAIN}`) {
  const c = await rawSmtp(port());
  clients.push(c);
  expect((await c.command('EHLO client.example')).code).toBe(250);
  expect((await c.command('MAIL FROM:<a@far.example>')).code).toBe(250);
  expect((await c.command(`RCPT TO:<${rcpt}>`)).code).toBe(250);
  return c;
}

describe('SMTP ingress under abuse', () => {
  it('a 1 GB DATA stream keeps memory bounded, is answered 552, and health stays fast', async () => {
    const baseline = process.memoryUsage().rss;
    let peak = baseline;
    const sampler = setInterval(() => {
      peak = Math.max(peak, process.memoryUsage().rss);
    }, 20);
    // Probed from another process: a stall of the service's loop shows as a slow sample (the maximum is asserted).
    const health = await watchHealth(stack.baseUrl);
    // The attacker is another process, as it would be: the service's event loop serves only the service.
    const flood = spawn(process.execPath, [
      fileURLToPath(new URL('./helpers/smtp-flood.mjs', import.meta.url)),
      String(port()),
      `someone@${DOMAIN}`,
      String(1024 ** 3),
    ]);
    let out = '';
    flood.stdout.on('data', (d: Buffer) => {
      out += d.toString();
    });
    const code = await new Promise<number | null>((resolve) => flood.once('exit', resolve));
    clearInterval(sampler);
    const samples = await health.stop();
    expect(code).toBe(0);
    expect(out.trim()).toMatch(/^552 /);
    // The limit is 5 MB: what the process holds for this client is bounded by it, not by the 1 GB sent.
    expect(peak - baseline, `rss grew by ${Math.round((peak - baseline) / 1e6)} MB`).toBeLessThan(200 * 1024 * 1024);
    expectHealthUp(samples, { minProbes: 4 });
  }, 240_000);

  it('caps connections per client address', async () => {
    const open = await Promise.all(Array.from({ length: 4 }, () => rawSmtp(port())));
    const fifth = await rawSmtp(port(), { waitGreeting: false });
    clients.push(...open, fifth);
    expect((await fifth.reply()).code).toBe(421);
    open[0]!.close();
    await new Promise((r) => open[0]!.socket.once('close', r));
    // A slot freed is usable again (the server sees the close asynchronously).
    let again: Awaited<ReturnType<typeof rawSmtp>> | undefined;
    for (let i = 0; i < 50 && !again; i++) again = await rawSmtp(port()).catch(() => undefined);
    expect(again).toBeDefined();
    clients.push(again!);
  });

  it('limits recipients per message', async () => {
    const c = await envelope('a@' + DOMAIN);
    expect((await c.command(`RCPT TO:<b@${DOMAIN}>`)).code).toBe(250);
    expect((await c.command(`RCPT TO:<c@${DOMAIN}>`)).code).toBe(250);
    expect((await c.command(`RCPT TO:<d@${DOMAIN}>`)).code).toBe(452);
    c.close();
  });

  it('drops a client that talks before the greeting', async () => {
    const c = await rawSmtp(port(), { waitGreeting: false });
    clients.push(c);
    c.socket.write('EHLO early.example\r\n');
    expect((await c.reply()).code).toBe(421);
    c.close();
  });

  it('disconnects a client over the command rate', async () => {
    const c = await rawSmtp(port());
    clients.push(c);
    let last = 250;
    for (let i = 0; i < 60 && last === 250; i++) last = (await c.command('NOOP')).code;
    expect(last).toBe(421);
    await new Promise((r) => (c.closed ? r(undefined) : c.socket.once('close', r)));
  });

  it('a 1 MB Content-Type header to a bounce address is answered fast, health stays fast', async () => {
    const c = await envelope(`bounce+msg_${'a'.repeat(24)}@bounces.${DOMAIN}`);
    expect((await c.command('DATA')).code).toBe(354);
    const health = await watchHealth(stack.baseUrl, 50);
    const started = performance.now();
    await c.write(`Content-Type: multipart/report; ${'a'.repeat(1024 * 1024)}\r\n\r\nbody\r\n.\r\n`);
    const answer = await c.reply();
    const ms = performance.now() - started;
    const samples = await health.stop();
    expect(answer.code).toBe(250);
    expect(ms).toBeLessThan(5000); // a backtracking scan of 1 MB would take minutes
    expectHealthUp(samples);
    c.close();
  });
});
