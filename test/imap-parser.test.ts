import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Framer, type Frame } from '../smtp/imap/framer.js';
import { parseCommand, ParseError, type Token } from '../smtp/imap/parser.js';
import { inSet, parseSequenceSet, formatSet } from '../smtp/imap/sequence.js';

const MAX_LINE = 200;
const MAX_LITERAL = 300;
const framer = () => new Framer({ maxLine: MAX_LINE, maxCommand: 1000, literalLimit: () => MAX_LITERAL });
const feed = (f: Framer, chunks: Buffer[]) => chunks.flatMap((c) => f.push(c));
const internals = (f: Framer) => f as unknown as { buf: Buffer; literalChunks: Buffer[] };

/** Splits bytes at the given cut points. */
function split(bytes: Buffer, cuts: number[]): Buffer[] {
  const points = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b);
  const out: Buffer[] = [];
  let at = 0;
  for (const p of points) {
    out.push(bytes.subarray(at, p));
    at = p;
  }
  out.push(bytes.subarray(at));
  return out;
}

const atom = fc.stringMatching(/^[A-Za-z0-9._-]{1,12}$/);
const commandName = fc.stringMatching(/^[A-Za-z]{1,12}$/);
const token: fc.Arbitrary<Token> = fc.letrec((tie) => ({
  tok: fc.oneof({ depthSize: 'small' },
    atom.map((value) => ({ type: 'atom' as const, value })),
    fc.string({ maxLength: 20 }).filter((s) => !/[\r\n]/.test(s)).map((s) => ({ type: 'string' as const, value: Buffer.from(s, 'utf8') })),
    fc.uint8Array({ maxLength: 40 }).map((b) => ({ type: 'string' as const, value: Buffer.from(b), literal: true })),
    fc.array(tie('tok'), { maxLength: 4 }).map((items) => ({ type: 'list' as const, items: items as Token[] })),
  ),
})).tok as fc.Arbitrary<Token>;

/** Writes tokens as a client would: quoted strings, synchronizing literals for raw bytes. */
function serialize(tokens: Token[]): Buffer {
  const out: Buffer[] = [];
  tokens.forEach((t, i) => {
    if (i) out.push(Buffer.from(' '));
    if (t.type === 'atom') out.push(Buffer.from(t.value));
    else if (t.type === 'list') out.push(Buffer.from('('), serialize(t.items), Buffer.from(')'));
    else if ((t as { literal?: boolean }).literal) out.push(Buffer.from(`{${t.value.length}}\r\n`), t.value);
    else out.push(Buffer.from(`"${t.value.toString('utf8').replace(/[\\"]/g, (c) => `\\${c}`)}"`));
  });
  return Buffer.concat(out);
}
const strip = (tokens: Token[]): unknown => tokens.map((t) => (t.type === 'list' ? { type: 'list', items: strip(t.items) } : t.type === 'string' ? { type: 'string', value: t.value.toString('hex') } : t));

describe('IMAP framing and parsing (property-based)', () => {
  it('parses what a client serializes, however the bytes are chunked', () => {
    fc.assert(fc.property(atom, commandName, fc.array(token, { maxLength: 5 }), fc.array(fc.nat(), { maxLength: 6 }), (tag, name, args, cuts) => {
      const wire = Buffer.concat([Buffer.from(`${tag} ${name}${args.length ? ' ' : ''}`), serialize(args), Buffer.from('\r\n')]);
      const roomy = new Framer({ maxLine: 100_000, maxCommand: 1_000_000, literalLimit: () => 100_000 });
      const frames = feed(roomy, split(wire, cuts)).filter((f) => f.type === 'command');
      expect(frames).toHaveLength(1);
      const cmd = parseCommand((frames[0] as Extract<Frame, { type: 'command' }>).parts);
      expect(cmd.tag).toBe(tag);
      expect(cmd.name).toBe(name.toUpperCase());
      expect(strip(cmd.args)).toEqual(strip(args));
    }), { numRuns: 300 });
  });

  it('never throws on arbitrary bytes, frames the same under any chunking, and keeps its buffers bounded', () => {
    fc.assert(fc.property(fc.uint8Array({ maxLength: 2000 }), fc.array(fc.nat(), { maxLength: 10 }), (bytes, cuts) => {
      const input = Buffer.from(bytes);
      const whole = framer();
      const a = feed(whole, [input]);
      const f = framer();
      const b: Frame[] = [];
      for (const chunk of split(input, cuts)) {
        b.push(...f.push(chunk));
        const { buf, literalChunks } = internals(f);
        expect(buf.length).toBeLessThanOrEqual(MAX_LINE + 1);
        expect(literalChunks.reduce((n, c) => n + c.length, 0)).toBeLessThanOrEqual(MAX_LITERAL);
      }
      expect(b.map(show)).toEqual(a.map(show));
      for (const fr of a) {
        if (fr.type !== 'command') continue;
        try {
          parseCommand(fr.parts);
        } catch (err) {
          expect(err).toBeInstanceOf(ParseError);
        }
      }
    }), { numRuns: 500 });
  });

  it('refuses an oversized synchronizing literal before any of it is sent; skips an oversized non-synchronizing one', () => {
    const f = framer();
    expect(f.push(Buffer.from('a1 APPEND INBOX {301}\r\n'))).toEqual([{ type: 'reject', head: 'a1 APPEND INBOX {301}', reason: expect.any(String), code: 'TOOBIG' }]);
    expect(f.midCommand).toBe(false);
    const g = framer();
    const frames = feed(g, [Buffer.from('a2 APPEND INBOX {5000+}\r\n'), Buffer.alloc(5000, 0x78), Buffer.from('\r\na3 NOOP\r\n')]);
    expect(frames.map((x) => x.type)).toEqual(['reject', 'command']);
    expect(internals(g).buf.length).toBe(0);
  });

  it('sequence sets: parse, membership and formatting agree', () => {
    fc.assert(fc.property(fc.uniqueArray(fc.integer({ min: 1, max: 500 }), { minLength: 1, maxLength: 40 }), (nums) => {
      const ranges = parseSequenceSet(formatSet(nums))!;
      for (let n = 1; n <= 500; n++) expect(inSet(ranges, n, 500)).toBe(nums.includes(n));
    }));
    expect(parseSequenceSet('1:*')).toEqual([[1, Infinity]]);
    for (const bad of ['', '0', '1:0', 'a', '1,,2', '4294967296']) expect(parseSequenceSet(bad)).toBeUndefined();
  });
});

const show = (f: Frame) => (f.type === 'command' ? { type: f.type, parts: f.parts.map((p) => (Buffer.isBuffer(p) ? `B:${p.toString('hex')}` : p)) } : f);
