import MailComposer from 'nodemailer/lib/mail-composer';
import { describe, expect, it } from 'vitest';
import { readSubmission } from '../core/parsing/submission.js';

type Options = ConstructorParameters<typeof MailComposer>[0];
const build = (m: Options) =>
  new MailComposer({ from: 'App <app@acme.test>', subject: 'Hi', text: 'Body', ...m }).compile().build();
const read = async (m: Options, rcpts: string[], from = 'app@acme.test') =>
  readSubmission(await build(m), { from, rcpts });

describe('a submitted message read as a send', () => {
  it('keeps To and Cc mailboxes that are envelope recipients; every other recipient is blind', async () => {
    const s = await read({ to: 'Ada <ada@x.test>, ghost@x.test', cc: 'cy@x.test', bcc: 'hidden@x.test' }, [
      'ada@x.test',
      'CY@x.test',
      'hidden@x.test',
      'extra@x.test',
    ]);
    expect(s.to).toEqual(['"Ada" <ada@x.test>']); // ghost@ was never a RCPT TO: it reaches no one and no header
    expect(s.cc).toEqual(['cy@x.test']);
    expect(s.bcc).toEqual(['hidden@x.test', 'extra@x.test']);
    expect(s.from).toBe('"App" <app@acme.test>');
  });

  it('honours the control headers and passes the others on; rebuilt ones are dropped', async () => {
    const s = await read(
      {
        to: 'ada@x.test',
        headers: {
          'X-Svc-Metadata': JSON.stringify({ order: 'A-1', paid: true }),
          'X-Svc-Track-Clicks': 'yes',
          'X-Svc-Track-Opens': '0',
          'X-Svc-Template': 'tpl_abc',
          'X-Svc-Template-Data': '{"name":"Ada"}',
          'X-Svc-Scheduled-At': 'in 2 hours',
          'X-Svc-Unknown': 'dropped',
          'X-Ticket': 'Ünïcode T-1',
          'List-Unsubscribe': '<mailto:u@acme.test>',
          'Return-Path': '<spoof@elsewhere.test>',
          'DKIM-Signature': 'v=1; forged',
        },
      },
      ['ada@x.test'],
    );
    expect(s).toMatchObject({
      metadata: { order: 'A-1', paid: true },
      trackClicks: true,
      trackOpens: false,
      templateId: 'tpl_abc',
      templateData: { name: 'Ada' },
      scheduledAt: 'in 2 hours',
    });
    expect(s.headers).toEqual({ 'X-Ticket': 'Ünïcode T-1', 'List-Unsubscribe': '<mailto:u@acme.test>' });
  });

  it('refuses control headers it cannot read, with the header named', async () => {
    await expect(read({ to: 'a@x.test', headers: { 'X-Svc-Metadata': '[1,2]' } }, ['a@x.test'])).rejects.toMatchObject({
      code: 'invalid_header',
      message: expect.stringContaining('X-Svc-Metadata'),
    });
    const many = Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`k${i}`, i]));
    await expect(
      read({ to: 'a@x.test', headers: { 'X-Svc-Metadata': JSON.stringify(many) } }, ['a@x.test']),
    ).rejects.toMatchObject({ code: 'invalid_header' });
    await expect(
      read({ to: 'a@x.test', headers: { 'X-Svc-Track-Opens': 'maybe' } }, ['a@x.test']),
    ).rejects.toMatchObject({ code: 'invalid_header' });
  });

  it('keeps text, html and attachments, and an inline image its Content-ID', async () => {
    const s = await read(
      {
        to: 'a@x.test',
        html: '<p><img src="cid:logo@acme"></p>',
        attachments: [
          { filename: 'report.pdf', content: Buffer.from('%PDF-1.4'), contentType: 'application/pdf' },
          { filename: 'logo.png', content: Buffer.from('PNG'), contentType: 'image/png', cid: 'logo@acme' },
        ],
      },
      ['a@x.test'],
    );
    expect(s.text?.trim()).toBe('Body');
    expect(s.html).toContain('cid:logo@acme');
    const parts = s.attachments.map((a) => [a.filename, a.contentType, a.cid]);
    expect(parts.sort((a, b) => String(a[0]).localeCompare(String(b[0])))).toEqual([
      ['logo.png', 'image/png', 'logo@acme'],
      ['report.pdf', 'application/pdf', undefined],
    ]);
    expect(Buffer.from(s.attachments.find((a) => a.filename === 'report.pdf')!.content).toString()).toBe('%PDF-1.4');
  });

  it('takes the envelope sender when the message has no From, and refuses a message with neither', async () => {
    const raw = Buffer.from('To: a@x.test\r\nSubject: bare\r\n\r\nbody\r\n');
    expect((await readSubmission(raw, { from: 'app@acme.test', rcpts: ['a@x.test'] })).from).toBe('app@acme.test');
    await expect(readSubmission(raw, { from: '', rcpts: ['a@x.test'] })).rejects.toMatchObject({
      code: 'invalid_address',
    });
  });
});
