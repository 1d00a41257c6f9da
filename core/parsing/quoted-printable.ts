/**
 * Quoted-printable decoding in linear time, byte for byte what libqp 2.1.2 (mailparser's decoder) answers.
 *
 * libqp drops the blanks that end a line with `/[\t ]+$/gm`, which takes time quadratic in a run of blanks
 * that no line break ends: one anonymous message with 50 KB of spaces in a quoted-printable part held a
 * parse thread for 9 s, 100 KB for 18 s. The parse worker swaps this decoder in for libqp's
 * (`useLinearQuotedPrintable`), so mailparser decodes bodies and encoded words in one pass per step.
 */
import { createRequire } from 'node:module';

const SP = 0x20,
  TAB = 0x09,
  CR = 0x0d,
  LF = 0x0a,
  EQ = 0x3d;

/** The value of an ASCII hex digit, or -1. */
function hexValue(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x41 && c <= 0x46) return c - 0x37;
  if (c >= 0x61 && c <= 0x66) return c - 0x57;
  return -1;
}

/** Step 1: a run of spaces and tabs right before CR, LF or the end of the input is dropped. */
function dropTrailingBlanks(input: Buffer): Buffer {
  const out = Buffer.allocUnsafe(input.length);
  let n = 0;
  for (let i = 0; i < input.length;) {
    const c = input[i]!;
    if (c !== SP && c !== TAB) {
      out[n++] = c;
      i++;
      continue;
    }
    let end = i + 1;
    while (end < input.length && (input[end] === SP || input[end] === TAB)) end++;
    const ends = end === input.length || input[end] === CR || input[end] === LF;
    if (!ends) n += input.copy(out, n, i, end);
    i = end;
  }
  return out.subarray(0, n);
}

/** Step 2: soft line breaks (`=` before CRLF, before LF, or at the very end) are dropped. */
function dropSoftBreaks(input: Buffer): Buffer {
  const out = Buffer.allocUnsafe(input.length);
  let n = 0;
  for (let i = 0; i < input.length; i++) {
    if (input[i] === EQ) {
      if (i + 1 === input.length) continue;
      if (input[i + 1] === LF) {
        i += 1;
        continue;
      }
      if (input[i + 1] === CR && input[i + 2] === LF) {
        i += 2;
        continue;
      }
    }
    out[n++] = input[i]!;
  }
  return out.subarray(0, n);
}

/** Decodes quoted-printable bytes (a string is read as latin1, one byte per char, as libqp does). */
export function decodeQuotedPrintable(value: Buffer | string): Buffer {
  const input = dropSoftBreaks(dropTrailingBlanks(Buffer.isBuffer(value) ? value : Buffer.from(value ?? '', 'latin1')));
  const out = Buffer.allocUnsafe(input.length);
  let n = 0;
  for (let i = 0; i < input.length; i++) {
    if (input[i] === EQ && i + 2 < input.length) {
      const hi = hexValue(input[i + 1]!),
        lo = hexValue(input[i + 2]!);
      if (hi >= 0 && lo >= 0) {
        out[n++] = hi * 16 + lo;
        i += 2;
        continue;
      }
    }
    out[n++] = input[i]!;
  }
  return Buffer.from(out.subarray(0, n));
}

type LibQp = {
  decode: (value: Buffer | string) => Buffer;
  Decoder: { prototype: { _flush(done: () => void): void } };
};
type DecoderState = { inputBytes: number; outputBytes: number; qpChunks: Buffer[]; push(b: Buffer): void };

/**
 * Makes the libqp that mailparser loads (through mailsplit and libmime) decode in linear time: its
 * `decode` export and its streaming Decoder's flush, which calls the quadratic function directly. Runs once
 * per parse worker thread; the serving threads never parse mail.
 */
export function useLinearQuotedPrintable(): void {
  const fromMailparser = createRequire(createRequire(import.meta.url).resolve('mailparser'));
  const libqp = createRequire(fromMailparser.resolve('@zone-eu/mailsplit'))('libqp') as LibQp;
  libqp.decode = decodeQuotedPrintable;
  libqp.Decoder.prototype._flush = function flush(this: DecoderState, done: () => void) {
    if (this.inputBytes) {
      const buf = decodeQuotedPrintable(Buffer.concat(this.qpChunks, this.inputBytes));
      this.outputBytes += buf.length;
      this.push(buf);
    }
    done();
  };
}
