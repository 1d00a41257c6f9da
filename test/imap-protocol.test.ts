import nodemailer from 'nodemailer';
import { eq } from 'drizzle-orm';
import { ImapFlow } from 'imapflow';
import { credentialHash } from '../core/secrets.js';
import { schema } from '../db/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestDns } from './helpers/dns.js';
import { rawImap } from './helpers/imap-wire.js';
import { mintPassword } from './helpers/mailbox.js';
import { eventually, startStack, type TestStack } from './helpers/stack.js';

const DOMAIN = 'wire.imapp.svc.test';
let stack: TestStack;
let dns: Awaited<ReturnType<typeof startTestDns>>;
let session: string;
let secret: string;
const user = `wire@${DOMAIN}`;

beforeAll(async () => {
  dns = await startTestDns();
  stack = await startStack({
    SERVICE_DOMAIN: 'imapp.svc.test',
    DNS_SERVERS: dns.server.address,
    IMAP_COMMAND_TIMEOUT_MS: '1000',
    IMAP_MAX_LITERAL_BYTES: '100000',
    LOGIN_MAX_FAILURES: '3',
  });
  session = (
    await stack.api('POST', '/api/auth/signup', {
      body: { email: 'wire@example.com', password: 'wire owner password' },
    })
  ).body.token;
  const domainId = (await stack.api('POST', '/api/domains/subdomain', { token: session, body: { subdomain: 'wire' } }))
    .body.domain.id;
  secret = (await mintPassword(stack, session, { domainId, address: 'wire', protocols: ['imap', 'api'] })).secret;
});
afterAll(async () => {
  await stack?.stop();
  await dns?.close();
});

const port = () => stack.service.imapPort!;
async function loggedIn(localAddress?: string) {
  const c = await rawImap(port(), { localAddress });
  expect(await c.cmd('l1', `LOGIN ${user} ${secret}`)).toMatch(/^l1 OK/);
  return c;
}

describe('IMAP bad input', () => {
  it('answers malformed commands with BAD and keeps serving', async () => {
    const c = await rawImap(port(), { localAddress: '127.0.0.2' });
    expect(c.text).toMatch(/^\* OK \[CAPABILITY IMAP4rev1 .*STARTTLS.*\]/);
    c.send('garbage\r\n');
    await c.until(() => c.text.includes('* BAD'));
    expect(await c.cmd('a1', 'FROBNICATE')).toBe('a1 BAD Unknown command FROBNICATE');
    expect(await c.cmd('a2', 'LOGIN')).toMatch(/^a2 BAD/);
    expect(await c.cmd('a3', 'SELECT INBOX')).toMatch(/^a3 BAD Log in first/);
    expect(await c.cmd('a4', 'LOGIN "unterminated')).toMatch(/^a4 BAD/);
    expect(await c.cmd('a5', 'LOGIN (a b')).toMatch(/^a5 BAD/);
    expect(await c.cmd('a6', `LOGIN ${user} svc_pw_wrong`)).toMatch(/^a6 NO \[AUTHENTICATIONFAILED\]/);
    expect(await c.cmd('a7', 'AUTHENTICATE CRAM-MD5')).toMatch(/^a7 NO/);
    expect(await c.cmd('a8', 'NOOP')).toBe('a8 OK NOOP completed');
    c.close();
  });

  it('refuses literals larger than allowed without reading them, and skips an oversized non-synchronizing one', async () => {
    const c = await loggedIn();
    const before = c.text.length;
    expect(await c.cmd('b1', 'APPEND INBOX {999999999}')).toMatch(/^b1 NO \[TOOBIG\]/);
    expect(c.text.slice(before)).not.toContain('+ ');
    expect(await c.cmd('b2', 'LOGIN {70000}')).toMatch(/^b2 NO \[TOOBIG\]/);
    c.send('b3 APPEND INBOX {200000+}\r\n');
    c.send(Buffer.alloc(200000, 0x41));
    c.send('\r\n');
    await c.until(() => /b3 NO \[TOOBIG\]/.test(c.text));
    expect(await c.cmd('b4', 'NOOP')).toMatch(/^b4 OK/);
    c.close();
  });

  it('drops an over-long line with one BAD, memory staying bounded, and goes on', async () => {
    const c = await loggedIn();
    const chunk = Buffer.alloc(256 * 1024, 0x61);
    for (let i = 0; i < 20; i++) c.send(chunk);
    c.send('\r\n');
    await c.until(() => c.text.includes('* BAD Command line too long'));
    expect(c.text.match(/Command line too long/g)).toHaveLength(1);
    expect(await c.cmd('c1', 'NOOP')).toMatch(/^c1 OK/);
    c.close();
  });

  it('times out a client that never finishes its literal', async () => {
    const c = await rawImap(port(), { localAddress: '127.0.0.3' });
    c.send('d1 LOGIN {10}\r\n');
    await c.until(() => c.text.includes('+ Ready'));
    c.send('abc');
    const start = Date.now();
    await c.until(() => c.closed, 5000);
    expect(c.text).toContain('* BYE Autologout');
    expect(Date.now() - start).toBeLessThan(4000);
  });

  it('unknown mailboxes, bad sequence sets and bad fetch items get NO or BAD', async () => {
    const c = await loggedIn();
    expect(await c.cmd('e1', 'SELECT Nope')).toMatch(/^e1 NO \[NONEXISTENT\]/);
    expect(await c.cmd('e2', 'STATUS Archive (MESSAGES)')).toMatch(/^e2 NO \[NONEXISTENT\]/);
    expect(await c.cmd('e3', 'CREATE Archive')).toMatch(/^e3 NO \[CANNOT\]/);
    expect(await c.cmd('e4', 'FETCH 1 FLAGS')).toMatch(/^e4 BAD/);
    expect(await c.cmd('e5', 'SELECT INBOX')).toMatch(/^e5 OK \[READ-WRITE\]/);
    expect(await c.cmd('e6', 'FETCH abc FLAGS')).toMatch(/^e6 BAD/);
    expect(await c.cmd('e7', 'FETCH 1:* (BODY[NOPE])')).toMatch(/^e7 BAD/);
    expect(await c.cmd('e8', 'SEARCH WHATEVER')).toMatch(/^e8 BAD/);
    expect(await c.cmd('e9', 'STORE 1 FLAGS (\\Bogus)')).toMatch(/^e9 BAD/);
    expect(await c.cmd('e10', 'COPY 1 Nowhere')).toMatch(/^e10 NO \[NONEXISTENT\]/);
    expect(await c.cmd('e11', 'LOGOUT')).toMatch(/^e11 OK/);
  });

  it('AUTHENTICATE PLAIN works inline (SASL-IR) and after a continuation', async () => {
    const plain = Buffer.from(`\u0000${user}\u0000${secret}`).toString('base64');
    const a = await rawImap(port());
    expect(await a.cmd('h1', `AUTHENTICATE PLAIN ${plain}`)).toMatch(/^h1 OK/);
    a.close();
    const b = await rawImap(port());
    b.send('h2 AUTHENTICATE PLAIN\r\n');
    await b.until(() => b.text.includes('\r\n+ '));
    b.send(`${plain}\r\n`);
    await b.until(() => /h2 OK/.test(b.text));
    expect(await b.cmd('h3', 'SELECT INBOX')).toMatch(/^h3 OK/);
    b.close();
  });

  it('a legacy svc_imap_ credential logs in to any address of the account', async () => {
    const legacy = 'svc_imap_wire-legacy-0123456789abcdef';
    const [owner] = await stack.service.core.db
      .select()
      .from(schema.users)
      .where(eq(schema.users.email, 'wire@example.com'));
    await stack.service.core.db.insert(schema.appPasswords).values({
      id: 'apw_wire_legacy_0000000000000',
      userId: owner!.id,
      domainId: null,
      label: 'legacy',
      address: '*',
      protocols: ['imap'],
      keyPrefix: legacy.slice(0, 14),
      secretHash: credentialHash(legacy),
      legacy: true,
      createdAt: Date.now(),
    });
    const c = await rawImap(port());
    expect(await c.cmd('i1', `LOGIN anybody@${DOMAIN} ${legacy}`)).toMatch(/^i1 OK/);
    expect(await c.cmd('i2', 'SELECT INBOX')).toMatch(/^i2 OK/);
    c.close();
    const other = await rawImap(port(), { localAddress: '127.0.0.6' });
    expect(await other.cmd('i3', `LOGIN anybody@elsewhere.example ${legacy}`)).toMatch(
      /^i3 NO \[AUTHENTICATIONFAILED\]/,
    );
    other.close();
  });

  it('locks out an address after repeated failed logins', async () => {
    const c = await rawImap(port(), { localAddress: '127.0.0.4' });
    for (let i = 0; i < 3; i++)
      expect(await c.cmd(`f${i}`, `LOGIN ${user} svc_pw_guess${i}`)).toMatch(/NO \[AUTHENTICATIONFAILED\]/);
    expect(await c.cmd('f9', `LOGIN ${user} ${secret}`)).toMatch(/^f9 NO \[UNAVAILABLE\]/);
    const other = await loggedIn('127.0.0.5');
    other.close();
    c.close();
  });
});

describe('IMAP message rendering', () => {
  it('renders BODYSTRUCTURE, part sections, header fields and partial fetches of a multipart message', async () => {
    const t = nodemailer.createTransport({
      host: '127.0.0.1',
      port: stack.service.smtpPort!,
      secure: false,
      ignoreTLS: true,
    });
    await t.sendMail({
      from: 'Dana <dana@far.example>',
      to: user,
      cc: 'Eve <eve@far.example>',
      subject: 'Multi part',
      text: 'plain text body',
      html: '<p>html body</p>',
      attachments: [
        { filename: 'notes.txt', content: 'attached notes' },
        {
          filename: 'inner.eml',
          contentType: 'message/rfc822',
          content: 'Subject: inner one\r\nFrom: x@y.example\r\n\r\ninner body\r\n',
        },
      ],
    });
    const client = new ImapFlow({
      host: '127.0.0.1',
      port: port(),
      secure: false,
      auth: { user, pass: secret },
      logger: false,
      disableAutoIdle: true,
      tls: { rejectUnauthorized: false },
    });
    client.on('error', () => undefined);
    await client.connect();
    try {
      await eventually(
        async () => ((await client.status('INBOX', { messages: true })) || { messages: 0 }).messages! > 0,
      );
      await client.mailboxOpen('INBOX');
      const fetched = await client.fetchOne('*', { bodyStructure: true, envelope: true, uid: true });
      if (!fetched) throw new Error('no message');
      const msg = fetched;
      expect(msg.envelope?.cc?.[0]).toMatchObject({ name: 'Eve', address: 'eve@far.example' });
      const bs = msg.bodyStructure!;
      expect(bs.type).toBe('multipart/mixed');
      const kinds = bs.childNodes!.map((n) => n.type);
      expect(kinds).toEqual(['multipart/alternative', 'text/plain', 'message/rfc822']);
      expect(bs.childNodes![1]).toMatchObject({
        part: '2',
        disposition: 'attachment',
        dispositionParameters: { filename: 'notes.txt' },
      });
      expect(bs.childNodes![2]!.envelope?.subject).toBe('inner one');
      const read = async (part: string) => {
        const d = await client.download(String(msg.uid), part, { uid: true });
        const chunks: Buffer[] = [];
        for await (const c of d.content!) chunks.push(c as Buffer);
        return Buffer.concat(chunks).toString();
      };
      expect(await read('1.2')).toContain('<p>html body</p>');
      expect(await read('2')).toBe('attached notes');
    } finally {
      await client.logout();
    }
    const c = await loggedIn();
    await c.cmd('g1', 'EXAMINE INBOX');
    await c.cmd(
      'g2',
      'FETCH 1 (BODY.PEEK[HEADER.FIELDS (SUBJECT)] BODY.PEEK[1.1]<0.5> BODY.PEEK[3.HEADER] BODY.PEEK[2.MIME])',
    );
    expect(c.text).toContain('BODY[HEADER.FIELDS (SUBJECT)] {23}\r\nSubject: Multi part\r\n\r\n');
    expect(c.text).toContain('BODY[1.1]<0> {5}\r\nplain');
    expect(c.text).toMatch(/BODY\[3\.HEADER\] \{\d+\}\r\nSubject: inner one\r\n/);
    expect(c.text).toMatch(/BODY\[2\.MIME\] \{\d+\}\r\nContent-Type: text\/plain/);
    expect(await c.cmd('g3', 'FETCH 1 (FLAGS)')).toMatch(/^g3 OK/);
    expect(c.text).toContain('* 1 FETCH (FLAGS ())');
    expect(await c.cmd('g4', 'STORE 1 +FLAGS (\\Seen)')).toMatch(/^g4 NO \[READ-ONLY\]/);
    c.close();
  });
});
