import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { renderForRecipient, type BroadcastContent } from '../core/render/broadcast.js';
import { parseReport, withoutTrailingBlanks } from '../core/parsing/reports.js';
import { bareAddress } from '../core/mail/recipients.js';
import { looksLikeAddress } from '../core/webhooks/routes.js';
import { createStaticZone } from '../dns/static-zone.js';
import { decodeWords } from '../smtp/imap/search.js';

/**
 * The scans that replaced super-linear regexes (issue 29, item 1), fed the input that made the old ones
 * quadratic. Linear is judged without trusting one wall-clock figure: the full input is handled within
 * BUDGET_MS, or, on a machine so loaded that even linear work is slower than that, in less than GROWTH
 * times a run on a quarter of it (linear work takes about 4 times; the old code 16 times, and minutes).
 */
const BUDGET_MS = 500;
const GROWTH = 10;

async function timed(run: () => unknown): Promise<number> {
  const started = performance.now();
  await run();
  return performance.now() - started;
}

async function expectLinear<T>(make: (size: number) => T, run: (input: T) => unknown, size: number) {
  const full = make(size);
  const ms = await timed(() => run(full));
  if (ms < BUDGET_MS) return;
  const quarter = make(size / 4);
  const quarterMs = await timed(() => run(quarter));
  expect(ms, `${size}: ${Math.round(ms)} ms, a quarter of it ${Math.round(quarterMs)} ms`).toBeLessThan(
    GROWTH * Math.max(quarterMs, 1),
  );
}

const ID = 'msg_AbCdEfGhIjKlMnOpQrStUv-_';
const SERVICE = 'reports.svc.test';
const opts = { envelopeTo: [`bounce+${ID}@bounces.acme.test`], serviceDomain: SERVICE };

/** A DSN whose status part is quoted-printable, `tail` written after the recipient group. */
function qpReport(diagnostic: string, tail = '', headers = '') {
  return Buffer.from(
    `${headers}Content-Type: multipart/report; report-type=delivery-status; boundary=b\r\n\r\n` +
      '--b\r\nContent-Type: message/delivery-status\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n' +
      'Reporting-MTA: dns; mx.rcpt.test\r\n\r\n' +
      `Final-Recipient: rfc822; Gone@Rcpt.test\r\nAction: failed\r\nStatus: 5.1.1\r\nDiagnostic-Code: smtp; ${diagnostic}\r\n` +
      `${tail}\r\n--b--\r\n`,
    'latin1',
  );
}
const bounced = (diagnostic: string) => ({
  kind: 'bounce',
  messageId: ID,
  recipients: [{ address: 'gone@rcpt.test', action: 'failed', status: '5.1.1', diagnostic, type: 'hard' }],
});

describe('quoted-printable in reports', () => {
  it('decodes soft line breaks, their transport padding and =XX escapes', async () => {
    expect(await parseReport(qpReport('550 no such=\r\n user'), opts)).toEqual(bounced('550 no such user'));
    expect(await parseReport(qpReport('550 no=  \t\r\nbody'), opts)).toEqual(bounced('550 nobody'));
    expect(await parseReport(qpReport('550 caf=C3=A9 closed   '), opts)).toEqual(bounced('550 café closed'));
  });

  it('drops blanks that end a line and keeps every other byte, as the regex it replaces did', () => {
    // The old expression, as an oracle on short strings only.
    // eslint-disable-next-line regexp/no-super-linear-move
    const old = (s: string) => s.replace(/[ \t]+(?=\r?\n)/g, '');
    const text = fc
      .array(fc.constantFrom(' ', '\t', '\r', '\n', '\r\n', 'a', '='), { maxLength: 40 })
      .map((a) => a.join(''));
    fc.assert(
      fc.property(text, (s) => {
        expect(withoutTrailingBlanks(s)).toBe(old(s));
      }),
      { numRuns: 500 },
    );
    expect(withoutTrailingBlanks('a \t \r\nb  \nc  ')).toBe('a\r\nb\nc  ');
  });

  it('reads a report with 200,000 spaces then x in linear time (the old decoding took minutes)', async () => {
    const make = (n: number) => qpReport('550 gone', `${' '.repeat(n)}x`);
    expect(await parseReport(make(200_000), opts)).toEqual(bounced('550 gone'));
    await expectLinear(make, (raw) => parseReport(raw, opts), 200_000);
  });

  it('reads a report under 60,000 repeated header fields in linear time', async () => {
    const make = (n: number) => qpReport('550 gone', '', 'X-Noise: a\r\n'.repeat(n));
    expect(await parseReport(make(60_000), opts)).toEqual(bounced('550 gone'));
    await expectLinear(make, (raw) => parseReport(raw, opts), 60_000);
  });

  it('finds our Message-ID after a broken one in the returned headers', async () => {
    const raw = Buffer.from(
      'Content-Type: multipart/report; report-type=delivery-status; boundary=b\r\n\r\n' +
        '--b\r\nContent-Type: message/delivery-status\r\n\r\nReporting-MTA: dns; mx.rcpt.test\r\n\r\n' +
        'Final-Recipient: rfc822; gone@rcpt.test\r\nAction: failed\r\nStatus: 5.1.1\r\n' +
        `\r\n--b\r\nContent-Type: text/rfc822-headers\r\n\r\nMessage-ID: <msg_${'x'.repeat(24)}@<${ID}@${SERVICE}>\r\n\r\n--b--\r\n`,
    );
    expect(
      await parseReport(raw, { envelopeTo: ['postmaster@bounces.acme.test'], serviceDomain: SERVICE }),
    ).toMatchObject({ kind: 'bounce', messageId: ID });
  });
});

describe('broadcast body tags', () => {
  const broadcast = (html: string): BroadcastContent => ({
    subject: 'Hi',
    preview: 'Preview',
    html,
    text: null,
    footerAddress: '1 Main St, $& Town',
  });
  const render = (html: string) =>
    renderForRecipient(broadcast(html), { email: 'a@b.test', name: null, attributes: {} }, 'https://svc.test/u/t')
      .html!;
  const PREVIEW = '<div style="display:none;max-height:0;overflow:hidden">Preview</div>';
  const FOOTER =
    '<div style="margin-top:24px;font-size:12px;color:#666">1 Main St, $&amp; Town<br><a href="https://svc.test/u/t">Unsubscribe</a></div>';

  it('puts the preview after <body…> and the footer before </body>, written as given', () => {
    expect(render('<html><BODY class="x">hi</BODY></html>')).toBe(
      `<html><BODY class="x">${PREVIEW}hi${FOOTER}</body></html>`,
    );
    expect(render('<p>hi</p>')).toBe(`${PREVIEW}<p>hi</p>${FOOTER}`);
    expect(render('<body<body>x')).toBe(`<body<body>${PREVIEW}x${FOOTER}`);
  });

  it('places them as the regexes they replace did', () => {
    // The old expressions, as an oracle on short strings only.
    const old = (html: string) => {
      const opened = /<body[^>]*>/i.test(html) ? html.replace(/<body[^>]*>/i, (m) => m + PREVIEW) : PREVIEW + html;
      return /<\/body>/i.test(opened) ? opened.replace(/<\/body>/i, () => `${FOOTER}</body>`) : opened + FOOTER;
    };
    const html = fc
      .array(fc.constantFrom('<body', '<BoDy', '>', '</body>', '</BODY>', 'x', ' ', '<'), {
        minLength: 1,
        maxLength: 20,
      })
      .map((a) => a.join(''));
    fc.assert(
      fc.property(html, (h) => {
        expect(render(h)).toBe(old(h));
      }),
      { numRuns: 500 },
    );
  });

  it('renders 1 MB of <body repeated in linear time (the old scan took minutes)', async () => {
    const make = (n: number) => '<body'.repeat(n / 5);
    expect(render(make(1_000_000))).toBe(`${PREVIEW}${make(1_000_000)}${FOOTER}`);
    await expectLinear(make, render, 1_000_000);
  });
});

describe('other scans over outside input', () => {
  it('bareAddress takes the bracketed address, never a bracket inside it', async () => {
    expect(bareAddress('"a <b" <C@D.test>')).toBe('c@d.test');
    expect(bareAddress(' X@Y.test ')).toBe('x@y.test');
    expect(bareAddress(`<${'<'.repeat(400)}a@b.test>`)).toBe('a@b.test');
    await expectLinear((n) => '<'.repeat(n), bareAddress, 1_000_000);
  });

  it('a forward destination is one address with a dot inside its domain', () => {
    for (const ok of ['a@b.test', 'a.b@c..d', 'x@sub.b.test']) expect(looksLikeAddress(ok), ok).toBe(true);
    for (const bad of ['a@btest', '@b.test', 'a@.test', 'a@test.', 'a@b@c.test', 'a b@c.test', 'a@b.te st', 'ab.test'])
      expect(looksLikeAddress(bad), bad).toBe(false);
  });

  it('IMAP SEARCH decodes an RFC 2231 charset and survives a run of * in one', async () => {
    expect(decodeWords('=?utf-8*en?q?caf=C3=A9?=')).toBe('café');
    await expectLinear((n) => `=?utf-8${'*'.repeat(n)}\n?q?caf=C3=A9?=`, decodeWords, 200_000);
  });

  it('DNS names lose their trailing dots, in linear time on a run of dots', async () => {
    const zone = createStaticZone([{ name: 'mx.test.', type: 'A', value: '127.0.0.1' }]);
    expect((await zone.lookup('MX.TEST..', 'A')).records).toHaveLength(1);
    await expectLinear(
      (n) => `a${'.'.repeat(n)}b`,
      (name) => zone.lookup(name, 'A'),
      200_000,
    );
  });
});
