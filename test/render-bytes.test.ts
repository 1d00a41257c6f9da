import MailComposer from 'nodemailer/lib/mail-composer';
import { describe, expect, it } from 'vitest';
import { renderMessage, serializeMime } from '../core/transport/render.js';

/**
 * The delivery path makes a message's bytes in one pass (core/transport/render.ts, serializeMime) rather than
 * through nodemailer's per-node streams: for every shape of message it must give exactly the bytes
 * nodemailer's own `build()` gives for the same compiled message.
 */
const base = {
  from: 'Zoë <zoe@acme.test>',
  to: ['Bob <bob@rcpt.test>', 'carol@rcpt.test'],
  cc: 'dave@rcpt.test',
  messageId: '<m1@svc.test>',
  baseBoundary: '0123456789abcdef',
  headers: { Date: 'Sat, 28 Nov 2026 12:00:00 +0000', 'X-Campaign': 'q3' },
};
const bytes = (n: number) => Buffer.from(Array.from({ length: n }, (_, i) => (i * 37 + 11) % 256));
const long = 'A line long enough to be folded by quoted-printable encoding, with an é here and there '.repeat(6);
const shapes: Record<string, ConstructorParameters<typeof MailComposer>[0]> = {
  'text only': { subject: 'Hi', text: 'Hello\nworld' },
  'html only': { subject: 'Hi', html: '<p>Hello <b>world</b></p>' },
  'text and html': { subject: 'Hi', text: 'Hello 1', html: '<p>Hello <b>1</b></p>' },
  'non-ASCII subject and body (quoted-printable)': { subject: 'Grüße — ünïcode', text: long, html: `<p>${long}</p>` },
  'trailing whitespace and a lone CR': { subject: 'ws', text: 'line with spaces   \nand a lone\rCR  ' },
  'an empty text': { subject: 'empty', text: '' },
  'attachments, binary and text': {
    subject: 'Report',
    text: 'See attached.',
    html: '<p>See attached.</p>',
    attachments: [
      { filename: 'a.bin', contentType: 'application/octet-stream', content: bytes(1000) },
      { filename: 'b.csv', contentType: 'text/csv', content: Buffer.from('a,b\n1,2\r\n3, é \n') },
      { filename: 'empty.txt', contentType: 'text/plain', content: Buffer.alloc(0) },
    ],
  },
  'an inline image (multipart/related)': {
    subject: 'Inline',
    text: 'plain',
    html: '<img src="cid:logo@x">',
    attachments: [{ filename: 'logo.png', contentType: 'image/png', content: bytes(300), cid: 'logo@x' }],
  },
  'threading and list headers': {
    subject: 'Re: thread',
    text: 'reply',
    inReplyTo: '<root@example.com>',
    references: '<root@example.com>',
    headers: { ...base.headers, 'List-Unsubscribe': '<https://svc.test/u/1>', 'Feedback-ID': 'a:b:c:d' },
  },
};

describe('message bytes in one pass', () => {
  for (const [name, shape] of Object.entries(shapes))
    it(`gives nodemailer's build() bytes: ${name}`, async () => {
      const compose = () => new MailComposer({ ...base, ...shape }).compile();
      const fast = serializeMime(compose());
      expect(fast).toBeInstanceOf(Buffer);
      expect(fast!.toString('latin1')).toBe((await compose().build()).toString('latin1'));
    });

  it('leaves to build() a message whose content is not in memory', async () => {
    const { Readable } = await import('node:stream');
    const node = new MailComposer({
      ...base,
      text: 'x',
      attachments: [{ filename: 's.txt', content: Readable.from([Buffer.from('streamed')]) }],
    }).compile();
    expect(serializeMime(node)).toBeUndefined();
  });

  it('renders mail with a fresh boundary per message', async () => {
    const input = {
      id: 'msg_b',
      fromAddr: 'a@acme.test',
      toAddrs: ['b@rcpt.test'],
      text: 't',
      html: '<p>t</p>',
      serviceDomain: 'svc.test',
    };
    const boundary = async () => /boundary="([^"]+)"/.exec((await renderMessage(input)).raw.toString('latin1'))?.[1];
    const [a, b] = [await boundary(), await boundary()];
    expect(a).toMatch(/^--_NmP-[0-9a-f]{16}-Part_1$/);
    expect(b).not.toBe(a);
  });
});
