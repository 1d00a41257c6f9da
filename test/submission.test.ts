import { connect as tlsConnect } from 'node:tls';
import { and, eq } from 'drizzle-orm';
import { dkimVerify } from 'mailauth/lib/dkim/verify.js';
import nodemailer from 'nodemailer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schema } from '../db/index.js';
import { resolverFor } from './helpers/dns.js';
import { GATE_PLANS, gateAccount, type GateAccount } from './helpers/gate.js';
import { rawImap } from './helpers/imap-wire.js';
import { mintPassword } from './helpers/mailbox.js';
import { FROM_DOMAIN, startSendingStack, type SendingStack } from './helpers/sending.js';
import { rawSmtp } from './helpers/smtp-client.js';
import { eventually, type TestStack } from './helpers/stack.js';

let env: SendingStack;
let stack: TestStack;

beforeAll(async () => {
  env = await startSendingStack({ env: { PLANS: JSON.stringify(GATE_PLANS), IMAP_PORT: '0' } });
  stack = env.stack;
}, 120_000);
afterAll(async () => env?.stop());

type Auth = { user: string; pass: string };
/** A nodemailer client of the submission server, STARTTLS (587-style) or implicit TLS (465-style). */
function client(auth: Auth, mode: 'starttls' | 'tls' = 'starttls') {
  const tls = mode === 'tls';
  return nodemailer.createTransport({
    host: '127.0.0.1',
    port: tls ? stack.service.submissionsPort! : stack.service.submissionPort!,
    secure: tls,
    requireTLS: !tls,
    auth,
    tls: { rejectUnauthorized: false }, // smtp-server's development certificate
  });
}
const keyAuth = () => ({ user: 'anything', pass: env.key });
const queuedId = (response: string) => /^250 2\.0\.0 Ok: queued as (msg_[\w-]+)$/.exec(response)?.[1];
/** The error a refused nodemailer send ends with: its reply code and text. */
const refusal = (p: Promise<unknown>) =>
  p.then(
    () => {
      throw new Error('the send was accepted');
    },
    (err: { responseCode?: number; response?: string }) => ({ code: err.responseCode, response: err.response ?? '' }),
  );
const guardCount = async () => {
  const t = schema.rateLimitWindows;
  const [row] = await stack.service.core.db
    .select({ count: t.count })
    .from(t)
    .where(and(eq(t.name, 'mailbox_login'), eq(t.key, '127.0.0.1')));
  return row?.count ?? 0;
};

describe('SMTP submission with the account key', () => {
  it('STARTTLS: the message is queued with its id, delivered DKIM-signed, and the API shows it with its trail', async () => {
    const info = await client(keyAuth()).sendMail({
      from: `Acme <hello@${FROM_DOMAIN}>`,
      to: 'ada@rcpt.test',
      cc: 'cy@rcpt.test',
      bcc: 'blind@rcpt.test',
      subject: 'Submitted over STARTTLS',
      text: 'Hello from an app',
      html: '<p>Hello from an app</p>',
      headers: {
        'X-Svc-Metadata': '{"order":"A-17","n":3}',
        'X-Svc-Track-Opens': 'false',
        'X-Ticket': 'T-42',
      },
      attachments: [
        { filename: 'note.txt', content: 'attached bytes' },
        { filename: 'logo.png', content: Buffer.from('PNG'), contentType: 'image/png', cid: 'logo@acme' },
      ],
    });
    const id = queuedId(info.response);
    expect(id, info.response).toBeDefined();

    const got = await env.sink.waitFor((r) => r.to.includes('ada@rcpt.test') && r.raw.includes(id!));
    const blind = await env.sink.waitFor((r) => r.to.includes('blind@rcpt.test'));
    const raw = got.raw.toString('latin1');
    expect(raw).toContain('Subject: Submitted over STARTTLS');
    expect(raw).toContain('X-Ticket: T-42');
    expect(raw).toContain('note.txt');
    expect(raw).toMatch(/^Content-ID: <logo@acme>/m); // the inline image keeps its Content-ID
    expect(raw).toMatch(/^Cc: cy@rcpt\.test/m);
    // Bcc never reaches a header, in any copy; the control headers are honoured and not delivered.
    for (const copy of [raw, blind.raw.toString('latin1')]) {
      expect(copy).not.toMatch(/^bcc:/im);
      expect(copy).not.toContain('blind@rcpt.test');
      expect(copy).not.toMatch(/^X-Svc-/im);
    }
    const r = resolverFor(`127.0.0.1:${env.dnsPort}`);
    const verdict = await dkimVerify(got.raw, { resolver: ((n: string, t: string) => r.resolve(n, t)) as never });
    expect(verdict.results[0]).toMatchObject({ status: { result: 'pass' }, signingDomain: FROM_DOMAIN });

    const detail = await eventually(async () => {
      const res = await stack.api('GET', `/api/messages/${id}`, { token: env.key });
      return res.body.message?.status === 'sent' ? res.body : undefined;
    });
    expect(detail.message).toMatchObject({ id, subject: 'Submitted over STARTTLS', metadata: { order: 'A-17', n: 3 } });
    const trail = JSON.stringify(detail);
    expect(trail).toContain('ada@rcpt.test');
    expect(trail).toContain('blind@rcpt.test');
  });

  it('implicit TLS sends too', async () => {
    const info = await client(keyAuth(), 'tls').sendMail({
      from: `hello@${FROM_DOMAIN}`,
      to: 'tls@rcpt.test',
      subject: 'Submitted over implicit TLS',
      text: 'Hello',
    });
    const id = queuedId(info.response);
    expect(id, info.response).toBeDefined();
    await env.sink.waitFor((r) => r.to.includes('tls@rcpt.test') && r.raw.includes(id!));
  });

  it('AUTH in clear is refused before the password is looked at', async () => {
    const before = await guardCount();
    const c = await rawSmtp(stack.service.submissionPort!);
    expect((await c.command('EHLO app.example')).code).toBe(250);
    const plain = Buffer.from(`\0user\0${env.key}`).toString('base64');
    expect((await c.command(`AUTH PLAIN ${plain}`)).code).toBe(538);
    expect((await c.command(`MAIL FROM:<hello@${FROM_DOMAIN}>`)).code).toBe(530);
    c.close();
    expect(await guardCount()).toBe(before);
  });

  it('a wrong key is 535 and counts as a failed login', async () => {
    const before = await guardCount();
    const refused = await refusal(
      client({ user: 'app', pass: 'svc_live_not-a-real-key' }).sendMail({
        from: `hello@${FROM_DOMAIN}`,
        to: 'x@rcpt.test',
        subject: 'x',
        text: 'x',
      }),
    );
    expect(refused.code).toBe(535);
    expect(refused.response).toMatch(/^535 5\.7\.8 /);
    expect(await guardCount()).toBe(before + 1);
  });

  it('a From on a domain the credential does not hold is 550 5.7.1', async () => {
    const refused = await refusal(
      client(keyAuth()).sendMail({
        envelope: { from: `hello@${FROM_DOMAIN}`, to: ['x@rcpt.test'] },
        from: 'ceo@bank.example',
        to: 'x@rcpt.test',
        subject: 'Spoof',
        text: 'x',
      }),
    );
    expect(refused.response).toMatch(/^550 5\.7\.1 /);
    const envelope = await refusal(
      client(keyAuth()).sendMail({ from: 'ceo@bank.example', to: 'x@rcpt.test', subject: 'Spoof', text: 'x' }),
    );
    expect(envelope.response).toMatch(/^550 5\.7\.1 /);
  });
});

describe('the gate, as on /v1/send', () => {
  let owner: GateAccount;
  beforeAll(async () => {
    owner = await gateAccount(env, 'subgate', { plan: 'tiny' });
  });
  const send = (to: string, auth: Auth = { user: 'x', pass: owner.key }) =>
    client(auth).sendMail({ from: `hello@${owner.domain}`, to, subject: 'Gate', text: 'x' });

  it('a domain-scoped key sends from its domain only', async () => {
    const other = await gateAccount(env, 'subscoped');
    const second = await other.api('POST', '/api/domains/subdomain', { subdomain: 'subscoped2' }, other.session);
    expect(second.status).toBeLessThan(300);
    const scoped = (await other.api('POST', '/api/keys/scoped', { domainId: other.domainId }, other.session)).body.key;
    const auth = { user: 'scoped', pass: scoped };
    const ok = await client(auth).sendMail({
      from: `app@${other.domain}`,
      to: 's1@rcpt.test',
      subject: 'S',
      text: 'x',
    });
    expect(queuedId(ok.response)).toBeDefined();
    const refused = await refusal(
      client(auth).sendMail({
        envelope: { from: `app@${other.domain}`, to: ['s2@rcpt.test'] },
        from: `app@subscoped2.${other.domain.split('.').slice(1).join('.')}`,
        to: 's2@rcpt.test',
        subject: 'S',
        text: 'x',
      }),
    );
    expect(refused.response).toMatch(/^550 5\.7\.1 /);
  });

  it('a suppressed recipient is refused at RCPT; the others of the message still go', async () => {
    const added = await owner.api('POST', '/api/contacts/suppressions', { email: 'gone@rcpt.test' });
    expect(added.status).toBeLessThan(300);
    const only = await refusal(send('gone@rcpt.test'));
    expect(only.response).toMatch(/^550 5\.7\.1 /);
    const info = await client({ user: 'x', pass: owner.key }).sendMail({
      from: `hello@${owner.domain}`,
      to: ['gone@rcpt.test', 'kept@rcpt.test'],
      subject: 'Partly suppressed',
      text: 'x',
    });
    expect(info.rejected).toEqual(['gone@rcpt.test']);
    expect(info.accepted).toEqual(['kept@rcpt.test']);
    await env.sink.waitFor((r) => r.to.includes('kept@rcpt.test'));
  });

  it('a capped account is refused 451 4.7.1 with the reason', async () => {
    // The tiny plan sends 2 recipients a day: the second test above used 1.
    await send('cap1@rcpt.test');
    const refused = await refusal(send('cap2@rcpt.test'));
    expect(refused.response).toMatch(/^451 4\.7\.1 .*daily send cap/);
  });

  it('an account whose email is not verified is refused 550 5.7.1', async () => {
    const fresh = await gateAccount(env, 'subunverified', { verified: false });
    const refused = await refusal(
      client({ user: 'x', pass: fresh.key }).sendMail({
        from: `hello@${fresh.domain}`,
        to: 'u@rcpt.test',
        subject: 'x',
        text: 'x',
      }),
    );
    expect(refused.response).toMatch(/^550 5\.7\.1 .*[Vv]erify/);
    expect(await fresh.outbound()).toHaveLength(0);
  });
});

describe('an app password granting smtp', () => {
  it('sends only as its addresses, and the copy is filed in Sent over IMAP', async () => {
    const domainId = (await stack.api('GET', '/api/domains', { token: env.session })).body.find(
      (d: { domain: string }) => d.domain === FROM_DOMAIN,
    ).id;
    const pw = await mintPassword(stack, env.session, { domainId, address: 'desk', protocols: ['smtp', 'imap'] });
    expect(pw.protocols).toEqual(['smtp', 'imap']);
    const auth = { user: `desk@${FROM_DOMAIN}`, pass: pw.secret };
    const info = await client(auth).sendMail({
      from: `Desk <desk@${FROM_DOMAIN}>`,
      to: 'customer@rcpt.test',
      subject: 'From the desk',
      text: 'We fixed it',
    });
    expect(queuedId(info.response)).toBeDefined();
    const foreign = await refusal(
      client(auth).sendMail({
        envelope: { from: `desk@${FROM_DOMAIN}`, to: ['customer@rcpt.test'] },
        from: `ceo@${FROM_DOMAIN}`,
        to: 'customer@rcpt.test',
        subject: 'x',
        text: 'x',
      }),
    );
    expect(foreign.response).toMatch(/^550 5\.7\.1 /);
    // Another address than the one the password opens cannot log in with it.
    const wrongUser = await refusal(
      client({ user: `ceo@${FROM_DOMAIN}`, pass: pw.secret }).sendMail({
        from: `ceo@${FROM_DOMAIN}`,
        to: 'customer@rcpt.test',
        subject: 'x',
        text: 'x',
      }),
    );
    expect(wrongUser.code).toBe(535);

    await env.sink.waitFor((r) => r.to.includes('customer@rcpt.test'));
    const imap = await rawImap(stack.service.imapPort!);
    expect(await imap.cmd('a1', `LOGIN desk@${FROM_DOMAIN} ${pw.secret}`)).toMatch(/^a1 OK/);
    await eventually(async () => {
      const status = await imap.cmd(`s${Date.now()}`, 'STATUS Sent (MESSAGES)');
      return /MESSAGES [1-9]/.test(imap.text) && status.includes('OK') ? true : undefined;
    });
    expect(await imap.cmd('a2', 'SELECT Sent')).toMatch(/^a2 OK/);
    expect(await imap.cmd('a3', 'FETCH 1 BODY.PEEK[HEADER.FIELDS (SUBJECT)]')).toMatch(/^a3 OK/);
    expect(imap.text).toContain('Subject: From the desk');
    imap.close();
  });

  it('a password without smtp cannot log in to submission', async () => {
    const domainId = (await stack.api('GET', '/api/domains', { token: env.session })).body.find(
      (d: { domain: string }) => d.domain === FROM_DOMAIN,
    ).id;
    const pw = await mintPassword(stack, env.session, { domainId, address: 'reader', protocols: ['imap'] });
    const refused = await refusal(
      client({ user: `reader@${FROM_DOMAIN}`, pass: pw.secret }).sendMail({
        from: `reader@${FROM_DOMAIN}`,
        to: 'x@rcpt.test',
        subject: 'x',
        text: 'x',
      }),
    );
    expect(refused.code).toBe(535);
  });
});

describe('the session re-checks its credential', () => {
  it('a key rotated after AUTH stops the next message', async () => {
    const acct = await gateAccount(env, 'subrotate');
    // One connection (nodemailer without a pool opens one per send): drive it by hand.
    const socket = tlsConnect({ host: '127.0.0.1', port: stack.service.submissionsPort!, rejectUnauthorized: false });
    let text = '';
    socket.on('data', (b) => (text += b.toString('latin1')));
    const until = (re: RegExp) => eventually(async () => (re.test(text) ? true : undefined));
    await until(/^220 /m);
    socket.write('EHLO app.example\r\n');
    await until(/250 [^\r]*\r\n$/);
    socket.write(`AUTH PLAIN ${Buffer.from(`\0x\0${acct.key}`).toString('base64')}\r\n`);
    await until(/^235 /m);
    expect((await acct.api('POST', '/api/keys/rotate', {}, acct.session)).status).toBeLessThan(300);
    socket.write(`MAIL FROM:<hello@${acct.domain}>\r\n`);
    await until(/^530 5\.7\.0 /m);
    socket.destroy();
  });
});
