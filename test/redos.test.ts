import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { filenameOf } from '../core/attachments/fetch-remote.js';
import { describeError } from '../core/log.js';
import { normalizeDomainName } from '../core/domains/names.js';
import { parseContentType, parseReport } from '../core/parsing/reports.js';
import { createTracking } from '../core/render/tracking.js';
import { parseScheduledAt } from '../core/mail/schedule-time.js';
import { fillMergeTags } from '../core/render/merge.js';
import { looksLikeJwt } from '../core/tokens.js';
import { checkWebhookUrl } from '../core/webhooks/url.js';
import { patternScore } from '../core/mail/patterns.js';
import { idempotencyKeyField } from '../api/contract.js';
import { classifyBounce, loadBounceRules } from '../core/mail/bounce-class.js';
import { compileRule, loadShapingFile } from '../core/shaping/config.js';
import { DEFAULT_SHAPING_FILE } from '../core/config.js';
import { parseDuration, parseRate } from '../core/shaping/values.js';

const shippedRules = [
  ...loadShapingFile(DEFAULT_SHAPING_FILE).providers.flatMap((p) => p.rules),
  ...loadShapingFile(DEFAULT_SHAPING_FILE).defaultRules,
];

/**
 * Every parser and regular expression that sees user input, fed adversarial strings (repetitions of the
 * pieces that make backtracking patterns blow up). A super-linear one fails here: 200 KB of the worst
 * repetition must be handled within BUDGET_MS, or, when a loaded machine makes even linear work slower
 * than that, in at most GROWTH times what a quarter of it took (linear work takes about 4 times; a
 * quadratic pattern 16 times, and on 200 KB far more than the budget besides).
 */
const BUDGET_MS = 250;
const SIZE = 200_000;
const GROWTH = 10;
const bounceRules = loadBounceRules();
const tracking = createTracking({ publicUrl: 'https://svc.test', secretKey: 'k'.repeat(40) });

const parsers: [string, (s: string) => unknown][] = [
  ['parseContentType', (s) => parseContentType(s)],
  [
    'parseReport (Content-Type)',
    (s) =>
      parseReport(Buffer.from(`Content-Type: multipart/report; ${s}\r\n\r\nbody`), {
        envelopeTo: ['bounce+x@b.svc.test'],
        serviceDomain: 'svc.test',
      }),
  ],
  [
    'parseReport (body)',
    (s) =>
      parseReport(
        Buffer.from(
          `Content-Type: multipart/report; boundary=b\r\n\r\n--b\r\nContent-Type: message/delivery-status\r\n\r\n${s}\r\n--b--`,
        ),
        { envelopeTo: [s], serviceDomain: 'svc.test' },
      ),
  ],
  ['instrumentHtml', (s) => tracking.instrumentHtml(s, 'msg_x', { opens: true, clicks: true })],
  ['fillMergeTags', (s) => fillMergeTags(s, { a: '1' }, { html: true })],
  [
    'parseScheduledAt',
    (s) => {
      try {
        parseScheduledAt(s);
      } catch {
        /* rejected is fine */
      }
    },
  ],
  [
    'normalizeDomainName',
    (s) => {
      try {
        normalizeDomainName(s, 'svc.test');
      } catch {
        /* rejected is fine */
      }
    },
  ],
  [
    'checkWebhookUrl',
    (s) => {
      try {
        checkWebhookUrl(s);
      } catch {
        /* rejected is fine */
      }
    },
  ],
  ['filenameOf', (s) => filenameOf(s, new URL('https://x.test/f'))],
  ['looksLikeJwt', (s) => looksLikeJwt(s)],
  ['patternScore', (s) => patternScore(`${s}*`, s)],
  ['describeError', (s) => describeError(Object.assign(new Error(s), { code: '23505', severity: 'ERROR' }))],
  ['idempotencyKeyField', (s) => idempotencyKeyField.safeParse(s)],
  ['classifyBounce', (s) => classifyBounce(bounceRules, { text: s, status: s })],
  [
    'parseRate',
    (s) => {
      try {
        parseRate(s);
      } catch {
        /* rejected is fine */
      }
    },
  ],
  [
    'parseDuration',
    (s) => {
      try {
        parseDuration(s);
      } catch {
        /* rejected is fine */
      }
    },
  ],
  [
    'compileRule',
    (s) => {
      try {
        compileRule(s);
      } catch {
        /* rejected is fine */
      }
    },
  ],
  // Remote answers reach the shipped automation rules cut to 512 bytes (core/shaping/shaper.ts).
  [
    'shipped automation rules',
    (s) => shippedRules.forEach((r) => r.regex.test(Buffer.from(s).subarray(0, 512).toString())),
  ],
];

/** Pieces whose repetition defeats backtracking patterns: quotes, escapes, separators, tag and tag-like openers. */
const piece = fc.constantFrom(
  '<a ',
  '<a href=',
  'a',
  '=',
  ';',
  ' ',
  '"',
  '\\"',
  '\\',
  '\t',
  '\r\n',
  '\n ',
  '<',
  '(',
  ')=(',
  '{{',
  '{{{a',
  'filename=',
  'x=y;',
  '--',
  '@',
  '.',
  'msg_',
  'in 1',
  '0',
);
const adversarial = fc
  .tuple(fc.array(piece, { minLength: 1, maxLength: 3 }), fc.constantFrom('', '!', '\n', '>', '"'))
  .map(([parts, tail]) => {
    const unit = parts.join('');
    const of = (size: number) => unit.repeat(Math.ceil(size / unit.length)).slice(0, size) + tail;
    return { input: of(SIZE), quarter: of(SIZE / 4) };
  });

async function timed(parse: (s: string) => unknown, input: string): Promise<number> {
  const started = performance.now();
  await parse(input);
  return performance.now() - started;
}

describe('no super-linear work on user input', () => {
  it.each(parsers)('%s does linear work on adversarial input', async (_name, parse) => {
    await fc.assert(
      fc.asyncProperty(adversarial, async ({ input, quarter }) => {
        const ms = await timed(parse, input);
        if (ms < BUDGET_MS) return;
        const quarterMs = await timed(parse, quarter);
        expect(
          ms,
          `${JSON.stringify(input.slice(0, 40))}… took ${Math.round(ms)} ms, a quarter of it ${Math.round(quarterMs)} ms`,
        ).toBeLessThan(GROWTH * Math.max(quarterMs, 1));
      }),
      { numRuns: 25 },
    );
  });

  it('parseContentType reads what it must', () => {
    expect(parseContentType('Multipart/Report; report-type=delivery-status; boundary="a\\"b;c"')).toEqual({
      type: 'multipart/report',
      params: { 'report-type': 'delivery-status', boundary: 'a"b;c' },
    });
    expect(parseContentType('text/plain;charset=utf-8 ; format = flowed')).toEqual({
      type: 'text/plain',
      params: { charset: 'utf-8', format: 'flowed' },
    });
  });
});

describe('error logs', () => {
  it('name a database error without its query or parameters', () => {
    const pg = Object.assign(new Error('duplicate key value violates unique constraint "users_email_uq"'), {
      code: '23505',
      severity: 'ERROR',
      detail: 'Key (email)=(secret@example.com) exists.',
    });
    const drizzle = Object.assign(
      new Error('Failed query: insert into "users" ("email") values ($1)\nparams: secret@example.com'),
      { cause: pg },
    );
    expect(describeError(drizzle)).toBe(
      'database error 23505: duplicate key value violates unique constraint "users_email_uq"',
    );
    expect(describeError(new Error('Failed query: select 1\nparams: secret@example.com'))).not.toContain(
      'secret@example.com',
    );
  });
});
