import { generateKeyPairSync } from 'node:crypto';
import { authenticate, sealMessage } from 'mailauth';
import nodemailer from 'nodemailer';
import { simpleParser } from 'mailparser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSrs } from '../core/mail/srs.js';
import { deriveKey } from '../core/secrets.js';
import { resolverFor } from './helpers/dns.js';
import { ingress } from './helpers/mailbox.js';
import { FROM_DOMAIN, SERVICE, startSendingStack, type SendingStack } from './helpers/sending.js';
import { rawSmtp } from './helpers/smtp-client.js';
import { eventually, type TestStack } from './helpers/stack.js';
import { eq } from 'drizzle-orm';
import { schema } from '../db/index.js';

/**
 * Forwards that still pass at the destination (docs/receiving.md): SRS envelope senders, From rewritten
 * for `p=quarantine`/`p=reject` senders, bounces to the SRS address returned to the original sender,
 * forged or expired SRS addresses refused at RCPT. The destination is a loopback MX (the sending stack's
 * sink) whose checks are mailauth's, against the test DNS and the service's own DNS server.
 */
let env: SendingStack;
let stack: TestStack;
let mail: ReturnType<typeof ingress>;

beforeAll(async () => {
  env = await startSendingStack({ env: { PUBLIC_IP: '127.0.0.1' } });
  stack = env.stack;
  mail = ingress(stack);
  // A sender domain that publishes p=reject, one that publishes p=none, and both delivered to the sink.
  env.dns.zone.set('_dmarc.strict.example', 'TXT', [{ value: 'v=DMARC1; p=reject' }]);
  env.dns.zone.set('_dmarc.lax.example', 'TXT', [{ value: 'v=DMARC1; p=none' }]);
  for (const name of ['strict.example', 'lax.example'])
    env.dns.zone.set(name, 'MX', [{ value: 'sink.rcpt.test', priority: 10 }]);
  const routed = await stack.api('POST', '/api/routes', {
    token: env.session,
    body: { match: `fwd@${FROM_DOMAIN}`, action: 'forward', destination: 'owner@rcpt.test' },
  });
  expect(routed.status).toBe(201);
});
afterAll(async () => {
  await env?.stop();
});

/** mailauth at the destination: the service's names from its own DNS server, the rest from the test DNS. */
function destinationResolver() {
  const own = resolverFor(`127.0.0.1:${env.dnsPort}`);
  const outside = resolverFor(env.dns.server.address);
  return (name: string, rr: string) =>
    (name === SERVICE || name.endsWith(`.${SERVICE}`) ? own : outside).resolve(name, rr);
}

const forwardedTo = (owner: string, subject: string) =>
  env.sink.waitFor((r) => r.to.includes(owner) && r.raw.toString('latin1').includes(`Subject: ${subject}`));

describe('SRS addresses', () => {
  const srs = createSrs(Buffer.alloc(32, 7));
  it('round-trip, case-insensitively, and refuse a changed hash or an old stamp', () => {
    const a = srs.forward('Alice@Far.Example', 'fwd.example');
    expect(a).toMatch(/^SRS0=[a-z2-7]{8}=[a-z2-7]{2}=Far\.Example=Alice@fwd\.example$/);
    expect(srs.reverse(a)).toEqual({ address: 'Alice@Far.Example' });
    expect(srs.reverse(a.toLowerCase())).toEqual({ address: 'alice@far.example' });
    const forged = a.replace(/^SRS0=(.)/, (_m, c: string) => `SRS0=${c === 'a' ? 'b' : 'a'}`);
    expect(srs.reverse(forged)).toBe('forged');
    expect(srs.reverse(srs.forward('alice@far.example', 'fwd.example', Date.now() - 30 * 86_400_000))).toBe('expired');
    expect(srs.reverse('alice@far.example')).toBeUndefined();
    // A forward of a forward is not wrapped twice: SRS1 names the first forwarder and reverses to its address.
    const twice = srs.forward(a, 'second.example');
    expect(twice).toMatch(/^SRS1=[a-z2-7]{8}=fwd\.example==/);
    expect(srs.reverse(twice)).toEqual({ address: a });
    expect(srs.forward('', 'fwd.example')).toBe('');
  });
});

describe('a forward', () => {
  it('of a p=reject sender passes SPF and DMARC at the destination: SRS sender, From rewritten, Reply-To the original', async () => {
    await mail({ from: 'Alice Strict <alice@strict.example>', to: `fwd@${FROM_DOMAIN}`, subject: 'strict forward' });
    const got = await forwardedTo('owner@rcpt.test', 'strict forward');
    expect(got.from).toMatch(new RegExp(`^SRS0=[a-z2-7]{8}=[a-z2-7]{2}=strict\\.example=alice@${FROM_DOMAIN}$`, 'i'));
    const parsed = await simpleParser(got.raw);
    expect(parsed.from?.value[0]).toEqual({ name: `Alice Strict via ${FROM_DOMAIN}`, address: `fwd@${FROM_DOMAIN}` });
    expect(parsed.replyTo?.value[0]?.address).toBe('alice@strict.example');
    expect(parsed.subject).toBe('strict forward');
    expect(parsed.text).toContain('body of strict forward');
    const verdict = await authenticate(got.raw, {
      ip: got.peer.replace(/^::ffff:/, ''),
      helo: got.ehlo,
      sender: got.from,
      mta: 'sink.rcpt.test',
      resolver: destinationResolver() as never,
    } as never);
    expect(verdict.spf && verdict.spf.status.result).toBe('pass');
    expect(verdict.dmarc && verdict.dmarc.status.result).toBe('pass');
    expect(verdict.dkim.results[0]).toMatchObject({ status: { result: 'pass' }, signingDomain: FROM_DOMAIN });
    // The inbound copy records its ARC verdict beside SPF, DKIM and DMARC (none: the test sender seals nothing).
    const inbound = await eventually(async () => {
      const [row] = await stack.service.core.db
        .select({ id: schema.messages.id, auth: schema.messages.auth })
        .from(schema.messages)
        .where(eq(schema.messages.subject, 'strict forward'));
      return row?.auth ? row : undefined;
    });
    expect(inbound.auth).toMatchObject({ arc: 'none' });
    const shown = await stack.api('GET', `/api/messages/${inbound.id}`, { token: env.session });
    expect(shown.body.message.auth).toMatchObject({ arc: 'none' });
  });

  it('of a p=none sender keeps its From; the envelope sender is still SRS', async () => {
    await mail({ from: 'Lou <lou@lax.example>', to: `fwd@${FROM_DOMAIN}`, subject: 'lax forward' });
    const got = await forwardedTo('owner@rcpt.test', 'lax forward');
    expect(got.from).toMatch(/^SRS0=.*=lax\.example=lou@/i);
    const parsed = await simpleParser(got.raw);
    expect(parsed.from?.value[0]).toEqual({ name: 'Lou', address: 'lou@lax.example' });
    expect(parsed.replyTo).toBeUndefined();
  });
});

describe('a forward made by POST /v1/route', () => {
  it('always leaves with the forwarding address as From: the API caller names any From it likes', async () => {
    const res = await stack.api('POST', '/v1/route', {
      token: env.key,
      body: { address: `fwd@${FROM_DOMAIN}`, from: 'CEO <ceo@lax.example>', subject: 'api forward', text: 'hi' },
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ routed: true, action: 'forward' });
    const got = await forwardedTo('owner@rcpt.test', 'api forward');
    const parsed = await simpleParser(got.raw);
    // lax.example publishes p=none: mail that arrived by SMTP would keep its From (above); made by the API, it may not.
    expect(parsed.from?.value[0]).toEqual({ name: `CEO via ${FROM_DOMAIN}`, address: `fwd@${FROM_DOMAIN}` });
    expect(parsed.replyTo?.value[0]?.address).toBe('ceo@lax.example');
  });
});

describe('mail to an SRS address', () => {
  /** One SMTP transaction into the ingress with a null sender (a bounce); answers the RCPT and DATA replies. */
  async function bounce(rcpt: string, body: string) {
    const c = await rawSmtp(stack.service.smtpPort!);
    await c.command('EHLO mx.rcpt.test');
    await c.command('MAIL FROM:<>');
    const atRcpt = await c.command(`RCPT TO:<${rcpt}>`);
    if (atRcpt.code !== 250) {
      await c.command('QUIT').catch(() => undefined);
      return { atRcpt };
    }
    await c.command('DATA');
    const atData = await c.command(`${body.replace(/\n/g, '\r\n')}\r\n.`);
    await c.command('QUIT').catch(() => undefined);
    return { atRcpt, atData };
  }

  it('a bounce of a forward reaches the original sender', async () => {
    await mail({ from: 'Alice Strict <alice@strict.example>', to: `fwd@${FROM_DOMAIN}`, subject: 'will bounce' });
    const forwarded = await forwardedTo('owner@rcpt.test', 'will bounce');
    const dsn = [
      'From: Mail Delivery System <MAILER-DAEMON@mx.rcpt.test>',
      `To: ${forwarded.from}`,
      'Subject: Undelivered Mail Returned to Sender',
      'Content-Type: text/plain',
      '',
      '<owner@rcpt.test>: mailbox unavailable (srs bounce test)',
    ].join('\n');
    const { atRcpt, atData } = await bounce(forwarded.from, dsn);
    expect(atRcpt.code).toBe(250);
    expect(atData?.code).toBe(250);
    const back = await env.sink.waitFor((r) => r.to.includes('alice@strict.example'));
    expect(back.raw.toString('latin1')).toContain('mailbox unavailable (srs bounce test)');
    expect(back.from).toMatch(new RegExp(`^bounce\\+msg_[\\w-]+@bounces\\.${FROM_DOMAIN.replace(/\./g, '\\.')}$`));
    // Not stored as inbound mail of the forwarding domain: the only row of it is the outbound one that returned it.
    const rows = await stack.service.core.db
      .select({ direction: schema.messages.direction, to: schema.messages.toAddrs })
      .from(schema.messages)
      .where(eq(schema.messages.subject, 'Undelivered Mail Returned to Sender'));
    expect(rows).toEqual([{ direction: 'outbound', to: ['alice@strict.example'] }]);
  });

  it('a forged or expired SRS address is refused at RCPT (550 5.1.1)', async () => {
    const key = deriveKey(stack.config.secretKey, 'srs-v1');
    const good = createSrs(key).forward('alice@strict.example', FROM_DOMAIN);
    const forged = good.replace(/^SRS0=(.)/i, (_m, c: string) => `SRS0=${c.toLowerCase() === 'a' ? 'b' : 'a'}`);
    const other = createSrs(Buffer.alloc(32, 1)).forward('alice@strict.example', FROM_DOMAIN);
    const old = createSrs(key).forward('alice@strict.example', FROM_DOMAIN, Date.now() - 40 * 86_400_000);
    for (const address of [forged, other, old]) {
      const { atRcpt } = await bounce(address, 'Subject: x\n\nx');
      expect(atRcpt.code, address).toBe(550);
      expect(atRcpt.text).toContain('5.1.1');
    }
    // The genuine one is accepted at RCPT.
    expect((await bounce(good, 'Subject: fine\n\nfine')).atRcpt.code).toBe(250);
  });
});

describe('ARC', () => {
  it('a message sealed by a relay whose key is published is recorded auth.arc pass', async () => {
    const keys = generateKeyPairSync('rsa', { modulusLength: 1024 });
    const publicKey = keys.publicKey.export({ type: 'spki', format: 'der' }).toString('base64');
    env.dns.zone.set('arc1._domainkey.relay.example', 'TXT', [{ value: `v=DKIM1; k=rsa; p=${publicKey}` }]);
    const message = Buffer.from(
      [
        'From: Carol <carol@relay.example>',
        `To: arc@${FROM_DOMAIN}`,
        'Subject: sealed by a relay',
        'Message-ID: <arc-test@relay.example>',
        'Date: Sat, 28 Nov 2026 12:00:00 +0000',
        '',
        'relayed once',
        '',
      ].join('\r\n'),
    );
    const outside = resolverFor(env.dns.server.address);
    const atRelay = await authenticate(message, {
      ip: '192.0.2.10',
      helo: 'origin.example',
      sender: 'carol@relay.example',
      mta: 'mx.relay.example',
      resolver: ((name: string, rr: string) => outside.resolve(name, rr)) as never,
    } as never);
    const seal = await sealMessage(message, {
      signingDomain: 'relay.example',
      selector: 'arc1',
      privateKey: keys.privateKey.export({ type: 'pkcs1', format: 'pem' }),
      authResults: atRelay.arc ? atRelay.arc.authResults : '',
      cv: atRelay.arc ? atRelay.arc.status.result : 'none',
    } as never);
    const sealed = Buffer.concat([Buffer.from(seal), Buffer.from(atRelay.headers), message]);
    const t = nodemailer.createTransport({
      host: '127.0.0.1',
      port: stack.service.smtpPort!,
      secure: false,
      ignoreTLS: true,
    });
    await t.sendMail({ envelope: { from: 'carol@relay.example', to: [`arc@${FROM_DOMAIN}`] }, raw: sealed });
    const row = await eventually(async () => {
      const [m] = await stack.service.core.db
        .select({ auth: schema.messages.auth })
        .from(schema.messages)
        .where(eq(schema.messages.subject, 'sealed by a relay'));
      return m?.auth ? m : undefined;
    });
    expect(row.auth).toMatchObject({ arc: 'pass' });
  });
});
