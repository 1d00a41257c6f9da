import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestDns } from './helpers/dns.js';
import { rawImap } from './helpers/imap-wire.js';
import { mintPassword } from './helpers/mailbox.js';
import { describeHealth, expectHealthUp, watchHealth } from './helpers/health-probe.js';
import { startStack, type TestStack } from './helpers/stack.js';

const DOMAIN = 'victims.imapx.svc.test';
const MB = 1024 * 1024;
/**
 * The bound on the process's growth while an attack runs. Unbounded, the issue measured 516 MB (a {0+}
 * flood) and 620 MB (an unread CAPABILITY pipeline); bounded, a connection holds at most a command's
 * budget and LIMITS.output of replies. 64 MB leaves room for what the worker, the Temporal client and the
 * probes allocate meanwhile, and is far under what any of the unbounded attacks takes.
 */
const GROWTH_BOUND_MB = 64;

let stack: TestStack;
let dns: Awaited<ReturnType<typeof startTestDns>>;
let user: string;
let session: string;
/** The storage quota of this stack: room for the 4 MiB of the SEARCH test and one copy of it, not two. */
const QUOTA = 10 * MB;
let secret: string;

beforeAll(async () => {
  dns = await startTestDns();
  stack = await startStack({
    SERVICE_DOMAIN: 'imapx.svc.test',
    DNS_SERVERS: dns.server.address,
    IMAP_MAX_CLIENTS_PER_IP: '10',
    IMAP_COMMAND_TIMEOUT_MS: '3000',
    STORAGE_QUOTA_BYTES: String(QUOTA),
  });
  session = (
    await stack.api('POST', '/api/auth/signup', {
      body: { email: 'abuse-imap@example.com', password: 'abuse imap password' },
    })
  ).body.token;
  const domainId = (
    await stack.api('POST', '/api/domains/subdomain', { token: session, body: { subdomain: 'victims' } })
  ).body.domain.id;
  secret = (await mintPassword(stack, session, { domainId, address: 'victim', protocols: ['imap', 'api'] })).secret;
  user = `victim@${DOMAIN}`;
});
afterAll(async () => {
  await stack?.stop();
  await dns?.close();
});

/** Files `count` messages of about `bytes` each into the victim's INBOX over IMAP APPEND; the n-th contains `needle-n`. */
async function fill(count: number, bytes: number) {
  const c = await rawImap(stack.service.imapPort!, { localAddress: '127.0.0.24' });
  expect(await c.cmd('f0', `LOGIN ${user} ${secret}`)).toMatch(/^f0 OK/);
  for (let i = 0; i < count; i++) {
    const body = `${'lorem ipsum dolor sit amet '.repeat(Math.ceil(bytes / 27)).slice(0, bytes)}\r\nneedle-${i}\r\n`;
    const msg = Buffer.from(`From: a@far.example\r\nSubject: filler ${i}\r\n\r\n${body}`);
    c.send(`f${i + 1} APPEND INBOX {${msg.length}+}\r\n`);
    c.send(msg);
    c.send('\r\n');
    await c.until(() => new RegExp(`f${i + 1} OK`).test(c.text), 20_000);
  }
  c.close();
}

type Outcome = {
  text: string;
  closed: boolean;
  written: number;
  answers?: string[];
  greeted?: number;
  refused?: number;
};

/** Runs one attack of test/helpers/imap-flood.mjs in its own process while health is probed and memory sampled. */
async function attack(...args: string[]) {
  const baseline = process.memoryUsage().rss;
  let peak = baseline;
  const sampler = setInterval(() => {
    peak = Math.max(peak, process.memoryUsage().rss);
  }, 20);
  const health = await watchHealth(stack.baseUrl, 50);
  const child = spawn(process.execPath, [
    fileURLToPath(new URL('./helpers/imap-flood.mjs', import.meta.url)),
    String(stack.service.imapPort),
    ...args,
  ]);
  let out = '';
  child.stdout.on('data', (d: Buffer) => {
    out += d.toString();
  });
  child.stderr.on('data', (d: Buffer) => {
    out += d.toString();
  });
  expect(await new Promise((resolve) => child.once('exit', resolve)), out).toBe(0);
  clearInterval(sampler);
  const samples = await health.stop();
  const result = JSON.parse(out.trim()) as Outcome;
  const figures = `${describeHealth(samples)}, rss growth ${((peak - baseline) / MB).toFixed(1)} MB; ${JSON.stringify(result).slice(-600)}`;
  expectHealthUp(samples);
  expect((peak - baseline) / MB, figures).toBeLessThan(GROWTH_BOUND_MB);
  return result;
}

describe('IMAP before login', () => {
  it('a {0+} continuation flood is cut off at the pre-auth command budget: the connection is closed', async () => {
    const r = await attack('continuation', String(17 * MB));
    expect(r.closed).toBe(true);
    expect(r.text).toMatch(/\* BYE Command larger than the \d+ bytes allowed/);
    expect(r.written).toBeLessThan(17 * MB);
  }, 120_000);

  it('a pre-auth APPEND of 30 MiB is answered BAD without a continuation', async () => {
    const r = await attack('append');
    expect(r.text).toMatch(/p1 BAD Literals are accepted before login only in LOGIN and AUTHENTICATE/);
    expect(r.text).not.toContain('+ ');
    expect(r.text).toMatch(/p2 OK NOOP/);
  }, 60_000);

  it('300 connections from one address: only IMAP_MAX_CLIENTS_PER_IP are served, the rest get BYE', async () => {
    const r = await attack('connections', '300', '127.0.0.20');
    expect(r.greeted).toBe(10);
    expect(r.refused).toBe(290);
    // Another address is still served meanwhile.
    const c = await rawImap(stack.service.imapPort!, { localAddress: '127.0.0.21' });
    expect(c.text).toMatch(/^\* OK/);
    c.close();
  }, 60_000);

  it('a client that pipelines CAPABILITY and never reads is ended at the pre-auth command budget', async () => {
    const r = await attack('unread', String(64 * MB));
    // The session ended after IMAP_PREAUTH_COMMANDS; the attacker's writes stalled soon after
    // (the attacker does not read, so it does not see the close itself).
    expect(r.written).toBeLessThan(16 * MB);
  }, 120_000);

  it('commands before login are limited: the connection ends after IMAP_PREAUTH_COMMANDS', async () => {
    const c = await rawImap(stack.service.imapPort!, { localAddress: '127.0.0.22' });
    for (let i = 0; i < 20; i++) expect(await c.cmd(`n${i}`, 'NOOP')).toMatch(/OK/);
    c.send('n20 NOOP\r\n');
    await c.until(() => c.closed);
    expect(c.text).toContain('* BYE Too many commands before login');
  });
});

describe('IMAP after login', () => {
  it('a {0+} flood after login is cut off at the command budget', async () => {
    const r = await attack('continuation', String(17 * MB), user, secret);
    expect(r.text).toMatch(/l1 OK/);
    expect(r.closed).toBe(true);
    expect(r.text).toMatch(/\* BYE Command larger than the \d+ bytes allowed/);
  }, 120_000);

  it('a client that pipelines CAPABILITY after login and never reads stops being read: memory stays flat', async () => {
    const r = await attack('unread', String(256 * MB), user, secret);
    // Each CAPABILITY answer is about 20 times the command: unread, it would have grown the server by gigabytes.
    // The server stopped reading once LIMITS.output of replies waited, so the attacker's writes stalled.
    expect(r.written).toBeLessThan(64 * MB);
  }, 120_000);

  it('LIST with a pattern of 100 "*%" pairs is matched in linear time', async () => {
    const pattern = `${'*%'.repeat(100)}Z`;
    const r = await attack(
      'commands',
      user,
      secret,
      `LIST "" "${pattern}"`,
      `LSUB "" "${pattern}"`,
      'LIST "" "*%"',
      'LIST "" "%X"',
    );
    expect(r.answers).toEqual([
      'k0 OK LIST completed',
      'k1 OK LSUB completed',
      'k2 OK LIST completed',
      'k3 OK LIST completed',
    ]);
    expect(r.text).toContain('"/" INBOX');
  }, 60_000);

  it('SEARCH with 2,000 TEXT "" keys over 4 MiB of mail is answered NO [LIMIT] within its work budget', async () => {
    await fill(8, 512 * 1024);
    const keys = Array.from({ length: 2000 }, () => 'TEXT ""').join(' ');
    const r = await attack(
      'commands',
      user,
      secret,
      `SEARCH ${keys}`,
      'SEARCH TEXT "needle-7"',
      'UID SEARCH 1:*,2:*,3:* NOT DELETED',
    );
    expect(r.answers![0]).toMatch(/^k0 NO \[LIMIT\] This SEARCH needs more work than one command may do/);
    expect(r.answers!.slice(1)).toEqual(['k1 OK SEARCH completed', 'k2 OK UID SEARCH completed']);
    expect(r.text).toMatch(/\* SEARCH \d+\r\nk1 OK/);
  }, 120_000);

  it('COPY 1:* INBOX repeated stops at the storage quota with NO [OVERQUOTA]; APPEND too; usage shows it', async () => {
    const before = (await stack.api('GET', '/api/billing/usage', { token: session })).body.storage;
    expect(before).toMatchObject({ quota: QUOTA, attachments: 0 });
    expect(before.used).toBeGreaterThan(4 * MB);
    const r = await attack('commands', user, secret, ...Array.from({ length: 6 }, () => 'COPY 1:* INBOX'), 'NOOP');
    // 4 MiB doubles to 8, then 16 would pass the 10 MiB quota: every later COPY is refused whole.
    expect(r.answers![0]).toMatch(/^k0 OK \[COPYUID /);
    for (const a of r.answers!.slice(1, 6)) expect(a).toMatch(/^k\d NO \[OVERQUOTA\] Storage quota exceeded/);
    expect(r.answers![6]).toMatch(/^k6 OK/);
    const after = (await stack.api('GET', '/api/billing/usage', { token: session })).body.storage;
    expect(after.used).toBe(2 * before.used);
    expect(after.used).toBeLessThanOrEqual(QUOTA);

    // APPEND of a message that does not fit: NO [OVERQUOTA] (the literal is read, then refused).
    const c = await rawImap(stack.service.imapPort!, { localAddress: '127.0.0.25' });
    expect(await c.cmd('q1', `LOGIN ${user} ${secret}`)).toMatch(/^q1 OK/);
    const msg = Buffer.from(`Subject: big\r\n\r\n${'x'.repeat(QUOTA - after.used + 1024)}\r\n`);
    c.send(`q2 APPEND INBOX {${msg.length}+}\r\n`);
    c.send(msg);
    c.send('\r\n');
    await c.until(() => /q2 (OK|NO|BAD)/.test(c.text), 20_000);
    expect(c.text).toMatch(/q2 NO \[OVERQUOTA\] Storage quota exceeded/);
    c.close();

    // The same quota over HTTP: an upload past it is 413 with the error body.
    const upload = await stack.api('POST', '/v1/attachments', {
      token: session,
      body: { filename: 'big.bin', content: Buffer.alloc(QUOTA - after.used + 1024).toString('base64') },
    });
    expect(upload).toMatchObject({
      status: 413,
      body: { code: 'storage_quota_exceeded', error: expect.stringContaining('Storage quota exceeded') },
    });
    const small = await stack.api('POST', '/v1/attachments', {
      token: session,
      body: { filename: 'small.txt', content: Buffer.from('hello').toString('base64') },
    });
    expect(small.status).toBe(201);
    expect((await stack.api('GET', '/api/billing/usage', { token: session })).body.storage).toMatchObject({
      attachments: 5,
      used: after.used + 5,
    });
  }, 120_000);

  it('a command that trickles in is ended at its absolute deadline', async () => {
    const c = await rawImap(stack.service.imapPort!, { localAddress: '127.0.0.23' });
    expect(await c.cmd('t1', `LOGIN ${user} ${secret}`)).toMatch(/^t1 OK/);
    c.send('t2 NOOP');
    // One byte at a time, each well inside any idle timer: only a deadline from the first byte ends it.
    const dribble = setInterval(() => c.send('x'), 200);
    try {
      await c.until(() => c.closed, 30_000);
    } finally {
      clearInterval(dribble);
    }
    expect(c.text).toContain('* BYE Autologout; command not completed in time');
  }, 60_000);
});
