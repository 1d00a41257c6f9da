import { eq } from 'drizzle-orm';
import { simpleParser } from 'mailparser';
import MailComposer from 'nodemailer/lib/mail-composer/index.js';
import MimeNode from 'nodemailer/lib/mime-node/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseReport, type ParsedReport } from '../core/parsing/reports.js';
import { newId } from '../core/ids.js';
import { schema } from '../db/index.js';
import { eventually, startStack, type TestStack } from './helpers/stack.js';

const SERVICE = 'reports.svc.test';
const ID = 'msg_AbCdEfGhIjKlMnOpQrStUv-_';
const opts = (envelopeTo: string[] = ['postmaster@bounces.acme.test']) => ({ envelopeTo, serviceDomain: SERVICE });

/** A real multipart/report: human text, the machine-readable part, and the returned original when given. */
async function report(
  reportType: string,
  machineType: string,
  fields: string,
  original?: { type: string; content: string | Buffer },
) {
  const root = new MimeNode(`multipart/report; report-type=${reportType}`);
  root.setHeader({ from: 'MAILER-DAEMON@mx.rcpt.test', to: 'bounce@bounces.acme.test', subject: 'Report' });
  root.createChild('text/plain').setContent('This is an automatically generated report.\r\n');
  root.createChild(machineType).setContent(fields);
  if (original) root.createChild(original.type).setContent(original.content);
  return root.build();
}

/** An original message as our delivery renders it (Message-ID `<msg id@SERVICE_DOMAIN>`). */
const original = (id: string, to: string, domain = SERVICE) =>
  new MailComposer({
    from: 'hello@acme.test',
    to,
    subject: 'Your receipt',
    text: 'Thanks!',
    messageId: `<${id}@${domain}>`,
    envelope: { from: `bounce+${id}@bounces.acme.test`, to: [to] },
  })
    .compile()
    .build();

const dsnFields = (recipients: string) =>
  `Reporting-MTA: dns; mx.rcpt.test\r\nArrival-Date: Mon, 2 Jun 2025 10:00:00 +0000\r\n\r\n${recipients}`;
const HARD =
  'Final-Recipient: rfc822; Gone@Rcpt.test\r\nAction: failed\r\nStatus: 5.1.1\r\n' +
  'Diagnostic-Code: smtp; 550 5.1.1 <gone@rcpt.test>: Recipient address rejected:\r\n    User unknown in local recipient table\r\n';
const SOFT =
  'Original-Recipient: rfc822;full@rcpt.test\r\nFinal-Recipient: rfc822; full@rcpt.test\r\nAction: delayed\r\n' +
  'Status: 4.2.2\r\nDiagnostic-Code: smtp; 452 4.2.2 Mailbox full\r\nWill-Retry-Until: Tue, 3 Jun 2025 10:00:00 +0000\r\n';
const arfFields = (rcpt: string, extra = '') =>
  `Feedback-Type: abuse\r\nUser-Agent: SomeISP-FBL/1.0\r\nVersion: 1\r\nOriginal-Mail-From: <bounce+${ID}@bounces.acme.test>\r\n${rcpt}${extra}`;

describe('parseReport', () => {
  it('reads an RFC 3464 DSN: hard and soft recipients, folded diagnostic, Message-ID from text/rfc822-headers', async () => {
    const raw = await report('delivery-status', 'message/delivery-status', dsnFields(`${HARD}\r\n${SOFT}`), {
      type: 'text/rfc822-headers',
      content: `From: hello@acme.test\r\nMessage-ID:\r\n <${ID}@${SERVICE.toUpperCase()}>\r\nSubject: x\r\n`,
    });
    expect(await parseReport(raw, opts())).toEqual({
      kind: 'bounce',
      messageId: ID,
      recipients: [
        {
          address: 'gone@rcpt.test',
          action: 'failed',
          status: '5.1.1',
          type: 'hard',
          diagnostic: '550 5.1.1 <gone@rcpt.test>: Recipient address rejected: User unknown in local recipient table',
        },
        {
          address: 'full@rcpt.test',
          action: 'delayed',
          status: '4.2.2',
          diagnostic: '452 4.2.2 Mailbox full',
          type: 'soft',
        },
      ],
    } satisfies ParsedReport);
  });

  it('matches by the VERP envelope recipient alone, keeping the id case-sensitive', async () => {
    const raw = await report('delivery-status', 'message/delivery-status', dsnFields(HARD));
    const parsed = await parseReport(raw, opts([`Bounce+${ID}@bounces.acme.test`]));
    expect(parsed).toMatchObject({
      kind: 'bounce',
      messageId: ID,
      recipients: [{ address: 'gone@rcpt.test', type: 'hard' }],
    });
    expect((await parseReport(raw, opts()))?.messageId).toBeNull();
  });

  it('treats a failed action with a 4.x.x status as soft and skips delivered recipients', async () => {
    const fields = dsnFields(
      'Final-Recipient: rfc822; a@rcpt.test\r\nAction: failed\r\nStatus: 4.4.7 (delivery time expired)\r\n\r\n' +
        'Final-Recipient: rfc822; b@rcpt.test\r\nAction: delivered\r\nStatus: 2.0.0\r\n',
    );
    const parsed = await parseReport(
      await report('delivery-status', 'message/delivery-status', fields),
      opts([`bounce+${ID}@b.acme.test`]),
    );
    expect(parsed).toEqual({
      kind: 'bounce',
      messageId: ID,
      recipients: [{ address: 'a@rcpt.test', action: 'failed', status: '4.4.7', diagnostic: null, type: 'soft' }],
    });
  });

  it('ignores a Message-ID of another domain', async () => {
    const raw = await report('delivery-status', 'message/delivery-status', dsnFields(HARD), {
      type: 'message/rfc822',
      content: await original(ID, 'gone@rcpt.test', 'elsewhere.test'),
    });
    expect(await parseReport(raw, opts())).toMatchObject({ kind: 'bounce', messageId: null });
  });

  it('reads an RFC 5965 abuse report with the original as message/rfc822', async () => {
    const raw = await report(
      'feedback-report',
      'message/feedback-report',
      arfFields('Original-Rcpt-To: <Angry@Rcpt.test>\r\n'),
      { type: 'message/rfc822', content: await original(ID, 'angry@rcpt.test') },
    );
    expect((await simpleParser(raw)).headers.get('content-type')).toMatchObject({ value: 'multipart/report' });
    expect(await parseReport(raw, opts(['fbl@acme.test']))).toEqual({
      kind: 'complaint',
      messageId: ID,
      recipient: 'angry@rcpt.test',
      feedbackType: 'abuse',
      userAgent: 'SomeISP-FBL/1.0',
    } satisfies ParsedReport);
  });

  it('takes the complaint recipient from the returned To, and the id from Original-Mail-From when the headers lack ours', async () => {
    const withTo = await report('feedback-report', 'message/feedback-report', arfFields(''), {
      type: 'message/rfc822',
      content: await original(ID, 'Someone <someone@rcpt.test>'),
    });
    expect(await parseReport(withTo, opts())).toMatchObject({ messageId: ID, recipient: 'someone@rcpt.test' });
    const bare = await report('feedback-report', 'message/feedback-report', arfFields(''));
    expect(await parseReport(bare, opts())).toMatchObject({ kind: 'complaint', messageId: ID, recipient: null });
  });

  it('answers null for a message that is not a report', async () => {
    const plain = await new MailComposer({
      from: 'a@rcpt.test',
      to: `bounce+${ID}@bounces.acme.test`,
      subject: 'Out of office',
      text: 'Action: failed\r\nStatus: 5.1.1',
    })
      .compile()
      .build();
    expect(await parseReport(plain, opts([`bounce+${ID}@bounces.acme.test`]))).toBeNull();
    const mdn = await report(
      'disposition-notification',
      'message/disposition-notification',
      'Final-Recipient: rfc822; a@rcpt.test\r\nDisposition: manual-action/MDN-sent-manually; displayed\r\n',
    );
    expect(await parseReport(mdn, opts())).toBeNull();
    expect(await parseReport(Buffer.from('garbage'), opts())).toBeNull();
  });

  it('copes with LF-only line endings, upper-case names and a base64 status part', async () => {
    const crlf = await report('delivery-status', 'message/delivery-status', dsnFields(`${HARD}\r\n${SOFT}`), {
      type: 'text/rfc822-headers',
      content: `Message-ID: <${ID}@${SERVICE}>\r\n`,
    });
    const lf = Buffer.from(
      crlf
        .toString()
        .replace(/\r\n/g, '\n')
        .replace('Content-Type: multipart/report', 'CONTENT-TYPE: Multipart/Report'),
    );
    expect(await parseReport(lf, opts())).toEqual(await parseReport(crlf, opts()));
    expect((await parseReport(lf, opts()))?.messageId).toBe(ID);

    const root = new MimeNode('multipart/report; report-type="delivery-status"');
    root
      .createChild('message/delivery-status')
      .setHeader('Content-Transfer-Encoding', 'base64')
      .setContent(
        dsnFields(
          HARD.toUpperCase().replace(
            'FINAL-RECIPIENT: RFC822; GONE@RCPT.TEST',
            'final-recipient: rfc822; gone@rcpt.test',
          ),
        ),
      );
    const b64 = await root.build();
    expect(b64.toString()).not.toContain('Action');
    expect(await parseReport(b64, opts([`bounce+${ID}@bounces.acme.test`]))).toMatchObject({
      recipients: [{ address: 'gone@rcpt.test', action: 'failed', type: 'hard' }],
    });
  });
});

describe('reports applied to sent messages', () => {
  let stack: TestStack;
  let token: string;
  const FROM = `hello@sender.${SERVICE}`;
  const api = (path: string) => stack.api('GET', path, { token }).then((r) => r.body);
  const row = async (id: string) =>
    (await stack.service.core.db.select().from(schema.messages).where(eq(schema.messages.id, id)))[0]!;
  /** Sends through POST /v1/send (captured) and waits until delivery marked it sent. */
  const sendOne = async (body: Record<string, unknown>) => {
    const key = (await api('/api/keys')).key;
    const id = (
      await stack.api('POST', '/v1/send', { token: key, body: { from: FROM, subject: 's', text: 't', ...body } })
    ).body.id as string;
    await eventually(async () => (await row(id)).status === 'sent');
    return id;
  };
  const apply = (r: ParsedReport) => stack.service.core.reports.apply(r);
  const dsn = (id: string, recipients: string) =>
    report('delivery-status', 'message/delivery-status', dsnFields(recipients), {
      type: 'text/rfc822-headers',
      content: `Message-ID: <${id}@${SERVICE}>\r\n`,
    });

  beforeAll(async () => {
    stack = await startStack({
      SERVICE_DOMAIN: SERVICE,
      DNS_SERVERS: '127.0.0.1:9',
      DOMAIN_VERIFY_INITIAL_MS: '600000',
    });
    token = (
      await stack.api('POST', '/api/auth/signup', {
        body: { email: 'reports@example.com', password: 'reports password' },
      })
    ).body.token;
    await stack.service.core.db
      .update(schema.users)
      .set({ emailVerified: true })
      .where(eq(schema.users.email, 'reports@example.com'));
    expect(
      (await stack.api('POST', '/api/domains/subdomain', { token, body: { subdomain: 'sender' } })).status,
    ).toBeLessThan(300);
  });
  afterAll(async () => {
    await stack?.stop();
  });

  it('a hard DSN bounces the message, records email.bounced and suppresses; applying it again adds nothing', async () => {
    const id = await sendOne({ to: 'gone@rcpt.test', cc: 'Full <full@rcpt.test>' });
    const outbox = (
      await stack.service.core.db.select().from(schema.outbox).where(eq(schema.outbox.messageId, id))
    )[0]!;
    expect(outbox.envelopeFrom).toBe(`bounce+${id}@bounces.sender.${SERVICE}`);
    const parsed = (await parseReport(await dsn(id, `${HARD}\r\n${SOFT}`), opts([outbox.envelopeFrom])))!;
    expect(await apply(parsed)).toEqual({ matched: true, messageId: id });
    expect(await apply(parsed)).toEqual({ matched: true, messageId: id });

    expect(await row(id)).toMatchObject({ status: 'bounced', bounceType: 'hard' });
    const events = (await api(`/api/events?messageId=${id}`)).filter((e: any) => e.type === 'email.bounced');
    expect(events.map((e: any) => [e.recipient, e.data.bounce.type]).sort()).toEqual([
      ['full@rcpt.test', 'soft'],
      ['gone@rcpt.test', 'hard'],
    ]);
    expect(events.find((e: any) => e.recipient === 'gone@rcpt.test').data.bounce.diagnostic).toContain(
      'User unknown in local recipient table',
    );
    const sups = await api('/api/contacts/suppressions');
    expect(sups.filter((s: any) => s.email === 'gone@rcpt.test')).toEqual([
      expect.objectContaining({ reason: 'hard_bounce', messageId: id, detail: expect.stringContaining('5.1.1') }),
    ]);
    expect(sups.some((s: any) => s.email === 'full@rcpt.test')).toBe(false);
    const key = (await api('/api/keys')).key;
    expect(
      (
        await stack.api('POST', '/v1/send', {
          token: key,
          body: { from: FROM, to: 'gone@rcpt.test', subject: 's', text: 't' },
        })
      ).body.code,
    ).toBe('recipient_suppressed');
  });

  it('a soft-only DSN records email.bounced (soft) without a suppression or a status change', async () => {
    const id = await sendOne({ to: 'full@rcpt.test' });
    expect(await apply((await parseReport(await dsn(id, SOFT), opts()))!)).toMatchObject({ matched: true });
    expect(await row(id)).toMatchObject({ status: 'sent', bounceType: 'soft' });
    const events = await api(`/api/events?messageId=${id}`);
    expect(events.find((e: any) => e.type === 'email.bounced')).toMatchObject({
      recipient: 'full@rcpt.test',
      data: { bounce: { type: 'soft', diagnostic: '452 4.2.2 Mailbox full' } },
    });
    expect((await api('/api/contacts/suppressions')).some((s: any) => s.email === 'full@rcpt.test')).toBe(false);
  });

  it('a complaint records email.complained and a complaint suppression', async () => {
    const id = await sendOne({ to: 'angry@rcpt.test' });
    const raw = await report(
      'feedback-report',
      'message/feedback-report',
      arfFields('Original-Rcpt-To: angry@rcpt.test\r\n').replace(ID, id),
      { type: 'message/rfc822', content: await original(id, 'angry@rcpt.test') },
    );
    const parsed = (await parseReport(raw, opts(['fbl@acme.test'])))!;
    expect(parsed).toMatchObject({ kind: 'complaint', messageId: id });
    await apply(parsed);
    await apply(parsed);
    const events = (await api(`/api/events?messageId=${id}`)).filter((e: any) => e.type === 'email.complained');
    expect(events).toEqual([
      expect.objectContaining({
        recipient: 'angry@rcpt.test',
        data: { complaint: { feedbackType: 'abuse', userAgent: 'SomeISP-FBL/1.0' } },
      }),
    ]);
    expect((await api('/api/contacts/suppressions')).find((s: any) => s.email === 'angry@rcpt.test')).toMatchObject({
      reason: 'complaint',
      messageId: id,
    });
  });

  it('only ever affects recipients of the message, and an unknown message is not matched', async () => {
    const id = await sendOne({ to: ['one@rcpt.test', 'two@rcpt.test'] });
    const stranger = HARD.replace('Gone@Rcpt.test', 'victim@elsewhere.test');
    expect(await apply((await parseReport(await dsn(id, stranger), opts()))!)).toMatchObject({ matched: true });
    expect((await api(`/api/events?messageId=${id}`)).some((e: any) => e.type === 'email.bounced')).toBe(false);
    expect((await api('/api/contacts/suppressions')).some((s: any) => s.email === 'victim@elsewhere.test')).toBe(false);
    expect(await row(id)).toMatchObject({ status: 'sent', bounceType: null });

    const unknown = newId('msg');
    expect(
      await apply({
        kind: 'bounce',
        messageId: unknown,
        recipients: [{ address: 'x@rcpt.test', action: 'failed', status: '5.1.1', diagnostic: null, type: 'hard' }],
      }),
    ).toEqual({ matched: false, messageId: null });
    expect(
      await apply({
        kind: 'complaint',
        messageId: null,
        recipient: 'x@rcpt.test',
        feedbackType: 'abuse',
        userAgent: null,
      }),
    ).toEqual({ matched: false, messageId: null });
    expect((await api('/api/contacts/suppressions')).some((s: any) => s.email === 'x@rcpt.test')).toBe(false);
  });
});
