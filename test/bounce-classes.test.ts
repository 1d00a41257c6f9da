import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../core/config.js';
import { classifyReported } from '../core/inbound/report-service.js';
import { parseReport } from '../core/parsing/reports.js';
import {
  BOUNCE_CLASSES,
  classifyBounce,
  findEnhancedCode,
  loadBounceRules,
  parseBounceRules,
  suppresses,
  type BounceClass,
} from '../core/mail/bounce-class.js';

/**
 * Bounce classification over the answers and DSNs the large providers and common MTAs send (public
 * samples, test/fixtures/bounces): every class is reached, and only permanent recipient-level classes suppress.
 */
const FIXTURES = join(import.meta.dirname, 'fixtures/bounces');
const rules = loadBounceRules();
type Sample = { provider: string; class: BounceClass; suppress: boolean; answer: string; permanent?: boolean };
const samples = (JSON.parse(readFileSync(join(FIXTURES, 'answers.json'), 'utf8')) as { answers: Sample[] }).answers;
const ID = 'msg_AAAAAAAAAAAAAAAAAAAAAAAA';
const dsn = async (name: string) => {
  const raw = readFileSync(join(FIXTURES, `${name}.eml`), 'utf8')
    .replaceAll('MSGID', ID)
    .replaceAll('SERVICE', 'svc.test');
  const report = await parseReport(Buffer.from(raw), {
    envelopeTo: [`bounce+${ID}@bounces.acme.example`],
    serviceDomain: 'svc.test',
  });
  expect(report).toMatchObject({ kind: 'bounce', messageId: ID });
  if (report?.kind !== 'bounce') throw new Error('not a bounce');
  return Object.fromEntries(
    report.recipients.map((r) => {
      const c = classifyReported(rules, r);
      return [r.address, { class: c.bounceClass, suppress: r.type === 'hard' && suppresses(c) }];
    }),
  );
};

describe('bounce classes from SMTP answers', () => {
  it.each(samples.map((s) => [s.provider, s.class, s] as const))('%s: %s', (_p, _c, s) => {
    const c = classifyBounce(rules, { text: s.answer, permanent: s.permanent ?? s.answer.trimStart().startsWith('5') });
    expect(c.bounceClass, s.answer).toBe(s.class);
    expect(suppresses(c), s.answer).toBe(s.suppress);
  });

  it('the samples reach every class, and every provider', () => {
    expect(new Set(samples.map((s) => s.class))).toEqual(new Set(BOUNCE_CLASSES));
    expect(new Set(samples.map((s) => s.provider))).toEqual(
      new Set(['gmail', 'microsoft', 'yahoo', 'apple', 'postfix', 'exim', 'network']),
    );
  });

  it('a temporary answer never suppresses, even of a recipient-level class', () => {
    const c = classifyBounce(rules, {
      text: '450 4.1.1 <x@example.org>: Recipient address rejected: try again later',
      permanent: true,
    });
    expect(c).toEqual({ bounceClass: 'invalid_recipient', permanent: false });
    expect(suppresses(c)).toBe(false);
  });

  it('finds the enhanced code, not an address or a number that looks like one', () => {
    expect(findEnhancedCode('550-5.1.1 The email account')).toBe('5.1.1');
    expect(findEnhancedCode('Messages from 192.0.2.10 deferred - 4.16.55.1')).toBeUndefined();
    expect(findEnhancedCode('deferred [#4.16.1].')).toBe('4.16.1');
    expect(findEnhancedCode('code 5.7.1234 is not one, 4.7.0 is')).toBe('4.7.0');
  });
});

describe('bounce classes from DSNs', () => {
  it('Postfix: unknown user (suppresses), mailbox full (delayed), no such domain (suppresses)', async () => {
    expect(await dsn('postfix')).toEqual({
      'nobody@example.org': { class: 'invalid_recipient', suppress: true },
      'full@example.org': { class: 'mailbox_full', suppress: false },
      'nxdomain@nx.example.net': { class: 'bad_domain', suppress: true },
    });
  });

  it('Exim: the remote answer decides over its generic 5.0.0 status; an unexplained failure is other', async () => {
    expect(await dsn('exim')).toEqual({
      'gone@example.net': { class: 'invalid_recipient', suppress: true },
      'nobody@nowhere.example.net': { class: 'other', suppress: false },
      'big@example.net': { class: 'message_too_large', suppress: false },
    });
  });

  it('Gmail: a spam block never suppresses', async () => {
    expect(await dsn('gmail')).toEqual({ 'reader@example.com': { class: 'spam_block', suppress: false } });
  });

  it('Microsoft: recipient not found suppresses, a block list never does', async () => {
    expect(await dsn('microsoft')).toEqual({
      'someone@contoso.com': { class: 'invalid_recipient', suppress: true },
      'blocked@contoso.com': { class: 'reputation', suppress: false },
    });
  });
});

describe('the rules file', () => {
  const dir = mkdtempSync(join(tmpdir(), 'bounce-rules-'));
  const file = (name: string, text: string) => {
    const p = join(dir, name);
    writeFileSync(p, text);
    return p;
  };

  it("an operator's file adds text rules tried first and overrides code keys", () => {
    const extra = loadBounceRules(
      file(
        'extra.toml',
        [
          '[codes]',
          '"5.7.1" = "reputation"',
          '"x.2.2" = "other"',
          '',
          '[[text]]',
          'class = "invalid_recipient"',
          'when = "permanent"',
          'contains = ["Account Closed By Owner"]',
        ].join('\n'),
      ),
    );
    expect(classifyBounce(extra, { text: '550 account closed by owner' }).bounceClass).toBe('invalid_recipient');
    expect(classifyBounce(rules, { text: '550 account closed by owner' }).bounceClass).toBe('other');
    expect(classifyBounce(extra, { text: '550 5.7.1 Relay access denied' }).bounceClass).toBe('reputation');
    expect(classifyBounce(extra, { text: '452 4.2.2 Mailbox full' }).bounceClass).toBe('other');
    // The shipped rules still apply where the operator's file says nothing.
    expect(classifyBounce(extra, { text: '550 5.1.1 nobody here' }).bounceClass).toBe('invalid_recipient');
  });

  it('a bad rule is refused naming the entry; BOUNCE_RULES_FILE is checked at startup', () => {
    expect(() => parseBounceRules('[[text]]\nclass = "nonsense"\ncontains = ["x"]')).toThrow(
      /"nonsense" is not a bounce class/,
    );
    expect(() => parseBounceRules('[codes]\n"5.1.x.1" = "other"')).toThrow(/expected an enhanced status code/);
    expect(() => parseBounceRules('[[text]]\nclass = "other"\ncontains = []')).toThrow(
      /"contains" must be a non-empty array/,
    );
    const bad = file('bad.toml', '[fallback]\n"5" = "sometimes"\n');
    expect(() => loadConfig({ BOUNCE_RULES_FILE: bad, SECRET_KEY: 'k'.repeat(40) })).toThrow(
      /BOUNCE_RULES_FILE: .*"sometimes" is not a bounce class/s,
    );
    expect(
      loadConfig({
        BOUNCE_RULES_FILE: file('ok.toml', '[fallback]\n"5" = "policy_block"\n'),
        SECRET_KEY: 'k'.repeat(40),
      }).bounceRules.fallback.get('5'),
    ).toBe('policy_block');
  });

  it('reads a bounded prefix of the answer', () => {
    const long = `550 ${'x'.repeat(5000)} user unknown`;
    expect(classifyBounce(rules, { text: long }).bounceClass).toBe('other');
  });
});
