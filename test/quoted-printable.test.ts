import { createRequire } from 'node:module';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { createParsePool } from '../core/parsing/pool.js';
import { decodeQuotedPrintable } from '../core/parsing/quoted-printable.js';

// libqp is mailparser's decoder (through mailsplit): the oracle for what the linear one must answer.
const libqp = createRequire(createRequire(import.meta.url).resolve('@zone-eu/mailsplit'))('libqp') as {
  decode(s: Buffer | string): Buffer;
};
const qpAlphabet = fc.constantFrom(' ', '\t', '\r', '\n', '=', 'A', 'f', '3', '0', 'x', 'G', '_', '\u00e9');
const qpText = fc.array(qpAlphabet, { maxLength: 60 }).map((a) => a.join(''));

describe('linear quoted-printable decoding', () => {
  it('answers byte for byte what libqp answers', () => {
    fc.assert(
      fc.property(qpText, (s) => {
        expect(decodeQuotedPrintable(Buffer.from(s, 'latin1')).equals(libqp.decode(Buffer.from(s, 'latin1')))).toBe(
          true,
        );
        expect(decodeQuotedPrintable(s).equals(libqp.decode(s))).toBe(true);
      }),
      { numRuns: 20_000 },
    );
  });

  it('decodes soft breaks, padding and escapes', () => {
    expect(decodeQuotedPrintable('caf=C3=A9 =\r\nau lait  \r\nend=\n!=').toString('utf8')).toBe('café au lait\r\nend!');
    expect(decodeQuotedPrintable('a=3Db=3d=ZZ=4').toString('latin1')).toBe('a=b==ZZ=4');
  });

  it('decodes 4 MB of blanks that no line break ends in one pass', () => {
    // libqp's /[\t ]+$/gm takes time quadratic in this run (50 KB: 9 s); a linear pass takes milliseconds.
    const started = performance.now();
    const out = decodeQuotedPrintable(`${' '.repeat(4_000_000)}x`);
    expect(out.length).toBe(4_000_001);
    expect(performance.now() - started).toBeLessThan(5_000);
  });
});

describe('mail parsing in the pool', () => {
  const pool = createParsePool({ threads: 1, timeoutMs: 10_000, memoryMb: 512 });
  afterAll(() => pool.close());

  it('parses a quoted-printable part with 1 MB of spaces within the budget (mailparser alone: minutes)', async () => {
    const raw = Buffer.from(
      `From: a@x.test\r\nSubject: qp\r\nContent-Type: text/plain\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n${' '.repeat(1_000_000)}x\r\n`,
    );
    const mail = await pool.run('parseMail', raw);
    expect(mail.text?.trim()).toBe('x');
    expect(mail.text?.length).toBeGreaterThan(1_000_000);
  });

  it('still decodes quoted-printable exactly as before', async () => {
    const raw = Buffer.from(
      'Subject: qp\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\ncaf=C3=A9 =\r\nau lait  \r\n',
    );
    expect((await pool.run('parseMail', raw)).text).toBe('café au lait\n');
  });
});
