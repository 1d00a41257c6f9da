import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { filenameOf } from '../core/attachments/fetch-remote.js';
import { describeError } from '../core/log.js';
import { normalizeDomainName } from '../core/domains/names.js';
import { parseContentType, parseReport } from '../core/inbound/reports.js';
import { createTracking } from '../core/sending/tracking.js';
import { parseScheduledAt } from '../core/sending/schedule-time.js';
import { fillMergeTags } from '../core/templates/merge.js';
import { looksLikeJwt } from '../core/tokens.js';
import { checkWebhookUrl } from '../core/webhooks/url.js';
import { patternScore } from '../core/webhooks/routes.js';

/**
 * Every parser and regular expression that sees user input, fed adversarial strings (repetitions of the
 * pieces that make backtracking patterns blow up) under a time budget. A super-linear one fails here:
 * 200 KB of the worst repetition must be handled within BUDGET_MS.
 */
const BUDGET_MS = 250;
const SIZE = 200_000;
const tracking = createTracking({ publicUrl: 'https://svc.test', secretKey: 'k'.repeat(40) });

const parsers: [string, (s: string) => unknown][] = [
  ['parseContentType', (s) => parseContentType(s)],
  ['parseReport (Content-Type)', (s) => parseReport(Buffer.from(`Content-Type: multipart/report; ${s}\r\n\r\nbody`), { envelopeTo: ['bounce+x@b.svc.test'], serviceDomain: 'svc.test' })],
  ['parseReport (body)', (s) => parseReport(Buffer.from(`Content-Type: multipart/report; boundary=b\r\n\r\n--b\r\nContent-Type: message/delivery-status\r\n\r\n${s}\r\n--b--`), { envelopeTo: [s], serviceDomain: 'svc.test' })],
  ['instrumentHtml', (s) => tracking.instrumentHtml(s, 'msg_x', { opens: true, clicks: true })],
  ['fillMergeTags', (s) => fillMergeTags(s, { a: '1' }, { html: true })],
  ['parseScheduledAt', (s) => { try { parseScheduledAt(s); } catch { /* rejected is fine */ } }],
  ['normalizeDomainName', (s) => { try { normalizeDomainName(s, 'svc.test'); } catch { /* rejected is fine */ } }],
  ['checkWebhookUrl', (s) => { try { checkWebhookUrl(s); } catch { /* rejected is fine */ } }],
  ['filenameOf', (s) => filenameOf(s, new URL('https://x.test/f'))],
  ['looksLikeJwt', (s) => looksLikeJwt(s)],
  ['patternScore', (s) => patternScore(`${s}*`, s)],
  ['describeError', (s) => describeError(Object.assign(new Error(s), { code: '23505', severity: 'ERROR' }))],
];

/** Pieces whose repetition defeats backtracking patterns: quotes, escapes, separators, tag and tag-like openers. */
const piece = fc.constantFrom('<a ', '<a href=', 'a', '=', ';', ' ', '"', '\\"', '\\', '\t', '\r\n', '\n ', '<', '(', ')=(', '{{', '{{{a', 'filename=', 'x=y;', '--', '@', '.', 'msg_', 'in 1', '0');
const adversarial = fc.tuple(fc.array(piece, { minLength: 1, maxLength: 3 }), fc.constantFrom('', '!', '\n', '>', '"')).map(([parts, tail]) => {
  const unit = parts.join('');
  return unit.repeat(Math.ceil(SIZE / unit.length)).slice(0, SIZE) + tail;
});

describe('no super-linear work on user input', () => {
  it.each(parsers)('%s stays within the time budget on adversarial input', async (_name, parse) => {
    await fc.assert(fc.asyncProperty(adversarial, async (input) => {
      const started = performance.now();
      await parse(input);
      const ms = performance.now() - started;
      expect(ms, `${JSON.stringify(input.slice(0, 40))}… took ${Math.round(ms)} ms`).toBeLessThan(BUDGET_MS);
    }), { numRuns: 25 });
  });

  it('parseContentType reads what it must', () => {
    expect(parseContentType('Multipart/Report; report-type=delivery-status; boundary="a\\"b;c"')).toEqual({
      type: 'multipart/report', params: { 'report-type': 'delivery-status', boundary: 'a"b;c' },
    });
    expect(parseContentType('text/plain;charset=utf-8 ; format = flowed')).toEqual({ type: 'text/plain', params: { charset: 'utf-8', format: 'flowed' } });
  });
});

describe('error logs', () => {
  it('name a database error without its query or parameters', () => {
    const pg = Object.assign(new Error('duplicate key value violates unique constraint "users_email_uq"'), { code: '23505', severity: 'ERROR', detail: 'Key (email)=(secret@example.com) exists.' });
    const drizzle = Object.assign(new Error('Failed query: insert into "users" ("email") values ($1)\nparams: secret@example.com'), { cause: pg });
    expect(describeError(drizzle)).toBe('database error 23505: duplicate key value violates unique constraint "users_email_uq"');
    expect(describeError(new Error('Failed query: select 1\nparams: secret@example.com'))).not.toContain('secret@example.com');
  });
});
