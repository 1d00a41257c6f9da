import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Framer, type Frame } from '../smtp/imap/framer.js';
import { parseCommand, ParseError, type Token } from '../smtp/imap/parser.js';
import { globMatch } from '../smtp/imap/glob.js';
import { compileSet, inSet, parseSequenceSet, formatSet } from '../smtp/imap/sequence.js';
import type { View } from '../smtp/imap/session.js';
import { resolveSet } from '../smtp/imap/view.js';

const MAX_LINE = 200;
const MAX_LITERAL = 300;
const framer = () =>
  new Framer({ maxLine: MAX_LINE, maxCommand: () => 1000, literalLimit: () => MAX_LITERAL, maxSkip: () => 10_000 });
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
  tok: fc.oneof(
    { depthSize: 'small' },
    atom.map((value) => ({ type: 'atom' as const, value })),
    fc
      .string({ maxLength: 20 })
      .filter((s) => !/[\r\n]/.test(s))
      .map((s) => ({ type: 'string' as const, value: Buffer.from(s, 'utf8') })),
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
const strip = (tokens: Token[]): unknown =>
  tokens.map((t) =>
    t.type === 'list'
      ? { type: 'list', items: strip(t.items) }
      : t.type === 'string'
        ? { type: 'string', value: t.value.toString('hex') }
        : t,
  );

describe('IMAP framing and parsing (property-based)', () => {
  it('parses what a client serializes, however the bytes are chunked', () => {
    fc.assert(
      fc.property(
        atom,
        commandName,
        fc.array(token, { maxLength: 5 }),
        fc.array(fc.nat(), { maxLength: 6 }),
        (tag, name, args, cuts) => {
          const wire = Buffer.concat([
            Buffer.from(`${tag} ${name}${args.length ? ' ' : ''}`),
            serialize(args),
            Buffer.from('\r\n'),
          ]);
          const roomy = new Framer({
            maxLine: 100_000,
            maxCommand: () => 1_000_000,
            literalLimit: () => 100_000,
            maxSkip: () => 100_000,
          });
          const frames = feed(roomy, split(wire, cuts)).filter((f) => f.type === 'command');
          expect(frames).toHaveLength(1);
          const cmd = parseCommand((frames[0] as Extract<Frame, { type: 'command' }>).parts);
          expect(cmd.tag).toBe(tag);
          expect(cmd.name).toBe(name.toUpperCase());
          expect(strip(cmd.args)).toEqual(strip(args));
        },
      ),
      { numRuns: 300 },
    );
  });

  it('never throws on arbitrary bytes, frames the same under any chunking, and keeps its buffers bounded', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 2000 }), fc.array(fc.nat(), { maxLength: 10 }), (bytes, cuts) => {
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
      }),
      { numRuns: 500 },
    );
  });

  it('refuses an oversized synchronizing literal before any of it is sent; skips an oversized non-synchronizing one', () => {
    const f = framer();
    expect(f.push(Buffer.from('a1 APPEND INBOX {301}\r\n'))).toEqual([
      { type: 'reject', head: 'a1 APPEND INBOX {301}', reason: expect.any(String), code: 'TOOBIG' },
    ]);
    expect(f.midCommand).toBe(false);
    const g = framer();
    const frames = feed(g, [
      Buffer.from('a2 APPEND INBOX {5000+}\r\n'),
      Buffer.alloc(5000, 0x78),
      Buffer.from('\r\na3 NOOP\r\n'),
    ]);
    expect(frames.map((x) => x.type)).toEqual(['reject', 'command']);
    expect(internals(g).buf.length).toBe(0);
  });

  it('sequence sets: parse, membership and formatting agree', () => {
    fc.assert(
      fc.property(fc.uniqueArray(fc.integer({ min: 1, max: 500 }), { minLength: 1, maxLength: 40 }), (nums) => {
        const ranges = parseSequenceSet(formatSet(nums))!;
        for (let n = 1; n <= 500; n++) expect(inSet(ranges, n, 500)).toBe(nums.includes(n));
      }),
    );
    expect(parseSequenceSet('1:*')).toEqual([[1, Infinity]]);
    for (const bad of ['', '0', '1:0', 'a', '1,,2', '4294967296']) expect(parseSequenceSet(bad)).toBeUndefined();
  });
});

const show = (f: Frame) =>
  f.type === 'command'
    ? { type: f.type, parts: f.parts.map((p) => (Buffer.isBuffer(p) ? `B:${p.toString('hex')}` : p)) }
    : f;

describe('IMAP framing budgets', () => {
  it('whatever the bytes (continuation lines, literals, any chunking), a command holds at most its budget', () => {
    const budget = 1500;
    const piece = fc.oneof(
      fc.constant('x {0+}\r\n'),
      fc.constant('{0}\r\n'),
      fc.constant('LOGIN a {5+}\r\nabcde'),
      fc.constant('APPEND {9}\r\n'),
      fc.constant('a NOOP\r\n'),
      fc.string({ maxLength: 30 }),
      fc.constant('{2000+}\r\n'),
    );
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 400 }), fc.array(fc.nat(), { maxLength: 8 }), (pieces, cuts) => {
        const f = new Framer({
          maxLine: 200,
          maxCommand: () => budget,
          literalLimit: (head) => (/LOGIN/.test(head) ? 100 : -1),
          maxSkip: () => 0,
        });
        const frames = feed(f, split(Buffer.from(pieces.join('')), cuts));
        for (const fr of frames) {
          if (fr.type !== 'command') continue;
          const held = fr.parts.reduce((n, p) => n + (Buffer.isBuffer(p) ? p.length : Buffer.byteLength(p) + 33), 0);
          expect(held).toBeLessThanOrEqual(budget);
        }
        expect(frames.filter((x) => x.type === 'fatal').length).toBeLessThanOrEqual(1);
        const { buf, literalChunks } = internals(f);
        expect(buf.length + literalChunks.reduce((n, c) => n + c.length, 0)).toBeLessThanOrEqual(200 + 1 + 100);
      }),
      { numRuns: 300 },
    );
  });

  const budgeted = (literal = 100) =>
    new Framer({
      maxLine: 1000,
      maxCommand: () => 2000,
      literalLimit: (head) => (/LOGIN/.test(head) ? literal : -1),
      maxSkip: () => 0,
    });

  it('charges {0+} continuation lines to the command: a flood of them ends the connection', () => {
    const f = budgeted();
    const frames = feed(f, [Buffer.from('a LOGIN {0+}\r\n'), Buffer.from('x {0+}\r\n'.repeat(1000))]);
    expect(frames.at(-1)).toEqual({ type: 'fatal', reason: 'Command larger than the 2000 bytes allowed' });
    expect(frames.filter((x) => x.type === 'fatal')).toHaveLength(1);
    expect(f.push(Buffer.from('b NOOP\r\n'))).toEqual([]);
  });

  it('refuses a literal the command may not carry with BAD before +, and ends on a non-synchronizing one', () => {
    expect(budgeted().push(Buffer.from('p APPEND INBOX {31457280}\r\n'))).toEqual([
      {
        type: 'reject',
        head: 'p APPEND INBOX {31457280}',
        reason: expect.stringMatching(/only in LOGIN/),
        code: 'BAD',
      },
    ]);
    expect(budgeted().push(Buffer.from('p APPEND INBOX {0}\r\n'))[0]).toMatchObject({ type: 'reject', code: 'BAD' });
    expect(budgeted().push(Buffer.from('p APPEND INBOX {5+}\r\n'))).toEqual([
      { type: 'fatal', reason: expect.stringMatching(/only in LOGIN/) },
    ]);
    expect(budgeted().push(Buffer.from('l LOGIN {101}\r\n'))[0]).toMatchObject({ type: 'reject', code: 'TOOBIG' });
    expect(feed(budgeted(), [Buffer.from('l LOGIN {3}\r\n'), Buffer.from('abc x\r\n')]).map((x) => x.type)).toEqual([
      'continue',
      'command',
    ]);
  });
});

describe('IMAP matchers (property-based, bounded work)', () => {
  /** The reference: the RegExp the matcher replaced, safe here because its inputs are tiny. */
  const reference = (pattern: string, name: string) =>
    new RegExp(
      `^${pattern
        .replace(/[.+?^${}()|[\]\\]/g, '\\$&')
        .replace(/\*/g, '.*')
        .replace(/%/g, '[^/]*')}$`,
      'i',
    ).test(name);
  const globChars = fc.constantFrom('*', '%', '/', 'i', 'n', 'b', 'o', 'x', 'S', 'e', '.', '(');

  it('LIST patterns: the linear matcher agrees with the regular expression on small inputs', () => {
    fc.assert(
      fc.property(
        fc.array(globChars, { maxLength: 8 }).map((a) => a.join('')),
        fc.array(fc.constantFrom('i', 'n', 'b', 'o', 'x', '/', 'S'), { maxLength: 8 }).map((a) => a.join('')),
        (pattern, name) => {
          expect(globMatch(pattern, name)).toBe(reference(pattern, name));
        },
      ),
      { numRuns: 2000 },
    );
    expect(globMatch('INBOX', 'inbox')).toBe(true);
    expect(globMatch('%', 'a/b')).toBe(false);
    expect(globMatch('*', 'a/b')).toBe(true);
  });

  it('LIST patterns: the matcher visits at most pattern × name positions, hostile patterns included', () => {
    // The work is counted, not timed: the states a name character can reach are bounded by the pattern.
    const hostile = fc
      .array(fc.constantFrom('*', '%', '*%', '%*', 'Z', 'x'), { maxLength: 1000 })
      .map((a) => a.join(''));
    fc.assert(
      fc.property(
        fc.oneof(
          hostile,
          fc.array(globChars, { maxLength: 2000 }).map((a) => a.join('')),
        ),
        fc.constantFrom('INBOX', 'Sent', 'Drafts', 'x'.repeat(50)),
        (pattern, name) => {
          const work = { steps: 0 };
          globMatch(pattern, name, work);
          expect(work.steps).toBeLessThanOrEqual(pattern.length * name.length);
        },
      ),
      { numRuns: 200 },
    );
    const work = { steps: 0 };
    expect(globMatch(`${'*%'.repeat(5000)}Z`, 'x'.repeat(50), work)).toBe(false);
    expect(work.steps).toBeLessThanOrEqual(10_001 * 50);
  });

  it('sequence sets resolve to exactly the UIDs a naive scan finds, in one pass', () => {
    const view = (uids: number[]) => ({ uids, flags: new Map(), readOnly: false, box: {} }) as unknown as View;
    const piece = fc.oneof(fc.integer({ min: 1, max: 60 }).map(String), fc.constant('*'));
    const set = fc
      .array(
        fc.tuple(piece, fc.option(piece)).map(([a, b]) => (b === null ? a : `${a}:${b}`)),
        { minLength: 1, maxLength: 30 },
      )
      .map((p) => p.join(','));
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.integer({ min: 1, max: 60 }), { maxLength: 40 }).map((u) => u.sort((a, b) => a - b)),
        set,
        fc.boolean(),
        (uids, text, byUid) => {
          const ranges = parseSequenceSet(text)!;
          const naive = byUid
            ? uids.filter((u) => inSet(ranges, u, uids.at(-1) ?? 0))
            : uids.filter((_u, i) => inSet(ranges, i + 1, uids.length));
          expect(resolveSet(view(uids), text, byUid)).toEqual(naive);
          const has = compileSet(ranges, 60);
          for (let n = 1; n <= 60; n++) expect(has(n)).toBe(inSet(ranges, n, 60));
        },
      ),
      { numRuns: 1000 },
    );
  });
});
