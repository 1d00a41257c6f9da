import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { ImapFlow } from 'imapflow';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestDns } from './helpers/dns.js';
import { rawImap } from './helpers/imap-wire.js';
import { ingress, mintPassword } from './helpers/mailbox.js';
import { eventually, startStack, type TestStack } from './helpers/stack.js';

const run = promisify(execFile);
const DOMAIN = 'desk.imap.svc.test';
let stack: TestStack;
let dns: Awaited<ReturnType<typeof startTestDns>>;
let session: string;
let domainId: string;
let mail: ReturnType<typeof ingress>;
const clients: ImapFlow[] = [];

beforeAll(async () => {
  dns = await startTestDns();
  stack = await startStack({
    SERVICE_DOMAIN: 'imap.svc.test',
    DNS_SERVERS: dns.server.address,
    IMAP_COMMAND_TIMEOUT_MS: '1000',
    IMAP_POLL_MS: '300',
    IMAP_MAX_LITERAL_BYTES: '100000',
  });
  session = (
    await stack.api('POST', '/api/auth/signup', {
      body: { email: 'imap@example.com', password: 'imap owner password' },
    })
  ).body.token;
  domainId = (await stack.api('POST', '/api/domains/subdomain', { token: session, body: { subdomain: 'desk' } })).body
    .domain.id;
  mail = ingress(stack);
});
afterAll(async () => {
  for (const c of clients) await c.logout().catch(() => c.close());
  await stack?.stop();
  await dns?.close();
});

async function imapClient(user: string, pass: string, opts: { secure?: boolean } = {}): Promise<ImapFlow> {
  const client = new ImapFlow({
    host: '127.0.0.1',
    port: opts.secure ? stack.service.imapsPort! : stack.service.imapPort!,
    secure: Boolean(opts.secure),
    auth: { user, pass },
    tls: { rejectUnauthorized: false },
    logger: false,
    disableAutoIdle: true,
  });
  client.on('error', () => undefined);
  await client.connect();
  clients.push(client);
  return client;
}
const apiList = (secret: string, q = '') => stack.api('GET', `/api/mailbox/messages${q}`, { token: secret });

describe('IMAP with real clients', () => {
  it('imapflow reads a message that came in over SMTP; flags are shared with the mailbox API both ways', async () => {
    const pw = await mintPassword(stack, session, { domainId, address: 'inbox', protocols: ['imap', 'api'] });
    await mail({ to: `inbox@${DOMAIN}`, subject: 'Hello IMAP', text: 'first body' });
    const listed = await eventually(async () => (await apiList(pw.secret)).body.messages?.[0]);
    const client = await imapClient(`inbox@${DOMAIN}`, pw.secret);
    const box = await client.mailboxOpen('INBOX');
    expect(box.exists).toBe(1);
    expect(Number(box.uidValidity)).toBeGreaterThan(0);
    const msg = await client.fetchOne(
      '*',
      { uid: true, flags: true, envelope: true, bodyStructure: true, source: true, size: true, internalDate: true },
      {},
    );
    expect(msg).toBeTruthy();
    if (!msg) return;
    expect(msg.uid).toBe(listed.uid);
    expect(msg.envelope?.subject).toBe('Hello IMAP');
    expect(msg.envelope?.from?.[0]).toMatchObject({ name: 'Alice', address: 'alice@far.example' });
    expect(msg.bodyStructure?.type).toBe('text/plain');
    expect(msg.size).toBe(listed.size);
    expect(msg.source?.toString()).toContain('first body');
    expect(msg.flags?.size ?? 0).toBe(0);

    await client.messageFlagsAdd({ uid: msg.uid }, ['\\Seen', '\\Flagged'], { uid: true });
    expect((await apiList(pw.secret)).body.messages[0].flags.split(' ').sort()).toEqual(['Flagged', 'Seen']);
    await stack.api('POST', `/api/mailbox/messages/${msg.uid}/flags`, {
      token: pw.secret,
      body: { flags: 'Answered' },
    });
    const again = await client.fetchOne(String(msg.uid), { flags: true }, { uid: true });
    expect(again && [...again.flags!]).toEqual(['\\Answered']);

    const part = await client.download(String(msg.uid), '1', { uid: true });
    const chunks: Buffer[] = [];
    for await (const c of part.content!) chunks.push(c as Buffer);
    expect(Buffer.concat(chunks).toString()).toContain('first body');
  });

  it('curl fetches the same message over imap:// and imaps://', async () => {
    const pw = await mintPassword(stack, session, { domainId, address: 'curl', protocols: ['imap', 'api'] });
    await mail({ to: `curl@${DOMAIN}`, subject: 'For curl' });
    const { uid } = await eventually(async () => (await apiList(pw.secret)).body.messages?.[0]);
    const plain = await run('curl', [
      '-s',
      '--max-time',
      '10',
      '--user',
      `curl@${DOMAIN}:${pw.secret}`,
      `imap://127.0.0.1:${stack.service.imapPort}/INBOX;UID=${uid}`,
    ]);
    expect(plain.stdout).toContain('Subject: For curl');
    const tls = await run('curl', [
      '-s',
      '-k',
      '--max-time',
      '10',
      '--user',
      `curl@${DOMAIN}:${pw.secret}`,
      `imaps://127.0.0.1:${stack.service.imapsPort}/INBOX;UID=${uid}`,
    ]);
    expect(tls.stdout).toContain('Subject: For curl');
    const starttls = await run('curl', [
      '-s',
      '-k',
      '--ssl-reqd',
      '--max-time',
      '10',
      '--user',
      `curl@${DOMAIN}:${pw.secret}`,
      `imap://127.0.0.1:${stack.service.imapPort}/INBOX;UID=${uid}`,
    ]);
    expect(starttls.stdout).toContain('Subject: For curl');
  });

  it('IDLE reports a new message within a second of its 250', async () => {
    const pw = await mintPassword(stack, session, { domainId, address: 'idler' });
    const client = await imapClient(`idler@${DOMAIN}`, pw.secret);
    await client.mailboxOpen('INBOX');
    const seen = new Promise<number>((resolve) => client.on('exists', () => resolve(Date.now())));
    void client.idle();
    await new Promise((r) => setTimeout(r, 200));
    await mail({ to: `idler@${DOMAIN}`, subject: 'wake up' });
    const accepted = Date.now();
    const at = await seen;
    expect(at - accepted).toBeLessThan(1000);
  });

  it('rotating or deleting a password ends its open session at the next command', async () => {
    const pw = await mintPassword(stack, session, { domainId, address: 'rotor' });
    const raw = await rawImap(stack.service.imapPort!);
    expect(await raw.cmd('a1', `LOGIN rotor@${DOMAIN} ${pw.secret}`)).toMatch(/^a1 OK/);
    expect(await raw.cmd('a2', 'SELECT INBOX')).toMatch(/^a2 OK/);
    const rotated = (await stack.api('POST', `/api/app-passwords/${pw.id}/rotate`, { token: session })).body.secret;
    raw.send('a3 NOOP\r\n');
    await raw.until(() => raw.closed);
    expect(raw.text).toContain('* BYE Credentials revoked');
    expect(raw.text).not.toContain('a3 OK');

    const client = await imapClient(`rotor@${DOMAIN}`, rotated);
    await client.mailboxOpen('INBOX');
    await stack.api('DELETE', `/api/app-passwords/${pw.id}`, { token: session });
    const after = await client.status('INBOX', { messages: true }).catch(() => false);
    expect(after).toBe(false);
    await eventually(async () => !client.usable);
  });

  it('a support-* password opens support-eu@ but not sales@', async () => {
    const pw = await mintPassword(stack, session, { domainId, address: 'support-*' });
    await mail({ to: `support-eu@${DOMAIN}`, subject: 'eu ticket' });
    await mail({ to: `sales@${DOMAIN}`, subject: 'sales lead' });
    const client = await imapClient(`support-eu@${DOMAIN}`, pw.secret);
    const box = await eventually(async () => {
      const st = await client.status('INBOX', { messages: true });
      return st && st.messages === 1 ? st : undefined;
    });
    expect(box).toMatchObject({ messages: 1 });
    const raw = await rawImap(stack.service.imapPort!);
    expect(await raw.cmd('a1', `LOGIN sales@${DOMAIN} ${pw.secret}`)).toMatch(/^a1 NO \[AUTHENTICATIONFAILED\]/);
    raw.close();
  });

  it('APPEND to Sent and Drafts, SEARCH, COPY and EXPUNGE', async () => {
    const pw = await mintPassword(stack, session, { domainId, address: 'writer', protocols: ['imap', 'api'] });
    const client = await imapClient(`writer@${DOMAIN}`, pw.secret);
    const draft = `From: writer@${DOMAIN}\r\nTo: bob@far.example\r\nSubject: a draft\r\n\r\nnot yet\r\n`;
    const appended = await client.append('Drafts', draft, ['\\Draft']);
    expect(appended && appended.uid).toBeGreaterThan(0);
    await client.append(
      'Sent',
      `From: writer@${DOMAIN}\r\nTo: bob@far.example\r\nSubject: sent by client\r\n\r\ndone\r\n`,
      ['\\Seen'],
    );
    const sent = (await apiList(pw.secret, `?mailbox=Sent&address=writer@${DOMAIN}`)).body.messages;
    expect(sent.map((m: any) => m.subject)).toEqual(['sent by client']);
    await mail({ to: `writer@${DOMAIN}`, subject: 'alpha news', from: 'Carol <carol@far.example>' });
    await mail({ to: `writer@${DOMAIN}`, subject: 'beta news' });
    await eventually(async () => (await apiList(pw.secret)).body.messages.length === 2);
    await client.mailboxOpen('INBOX');
    expect(await client.search({ from: 'carol' }, { uid: true })).toHaveLength(1);
    expect(await client.search({ subject: 'news' })).toEqual([1, 2]);
    expect(await client.search({ or: [{ subject: 'alpha' }, { subject: 'beta' }], seen: false })).toEqual([1, 2]);
    await client.messageFlagsAdd('1', ['\\Seen']);
    expect(await client.search({ seen: true })).toEqual([1]);
    expect(await client.search({ not: { seen: true } })).toEqual([2]);
    const copied = await client.messageCopy('1', 'Drafts');
    expect(copied && copied.uidMap?.size).toBe(1);
    await client.messageDelete('1');
    expect(await client.status('INBOX', { messages: true })).toMatchObject({ messages: 1 });
    expect(await client.status('Drafts', { messages: true })).toMatchObject({ messages: 2 });
    const list = await client.list();
    expect(list.map((l) => l.path).sort()).toEqual(['Drafts', 'INBOX', 'Sent']);
  });
});
