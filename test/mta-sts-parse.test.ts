import { describe, expect, it } from 'vitest';
import { parsePolicy } from '../core/mta-sts/parse.js';
import { normalizeDomain, parseStsRecords } from '../core/mta-sts/record.js';
import { allowedHosts, mxMatches } from '../core/mta-sts/policy.js';

describe('the _mta-sts TXT record (RFC 8461 §3.1)', () => {
  it('reads the id of exactly one v=STSv1 record, other TXT records aside', () => {
    expect(parseStsRecords([['v=STSv1; id=20260101T000000;'], ['v=spf1 -all']])).toEqual({ id: '20260101T000000' });
    expect(parseStsRecords([['v=STSv1;', ' id=abc123']])).toEqual({ id: 'abc123' });
    expect(parseStsRecords([['v=STSv1; ext=1; id=A1']])).toEqual({ id: 'A1' });
  });

  it('has no policy for none, several, or a malformed record', () => {
    expect(parseStsRecords([])).toHaveProperty('none');
    expect(parseStsRecords([['v=spf1 -all']])).toHaveProperty('none');
    expect(parseStsRecords([['v=STSv1; id=a'], ['v=STSv1; id=b']])).toEqual({
      none: '2 v=STSv1 records (exactly one is allowed)',
    });
    expect(parseStsRecords([['v=STSv1;']])).toEqual({ none: 'record has no id= field' });
    expect(parseStsRecords([['v=STSv1; id=has-dash']])).toHaveProperty('none');
    expect(parseStsRecords([[`v=STSv1; id=${'a'.repeat(33)}`]])).toHaveProperty('none');
    expect(parseStsRecords([['v=STSv1; id=a; id=b']])).toHaveProperty('none');
    expect(parseStsRecords([['v=STSv10; id=a']])).toHaveProperty('none');
    expect(parseStsRecords([[`v=STSv1; id=a; x=${'y'.repeat(2000)}`]])).toHaveProperty('none');
  });

  it('stays linear on a hostile record', () => {
    const started = Date.now();
    parseStsRecords([[`v=STSv1;${' ;'.repeat(400)}${'='.repeat(400)}`]]);
    expect(Date.now() - started).toBeLessThan(100);
  });

  it('normalizes domain names and refuses what is not one', () => {
    expect(normalizeDomain('Example.COM.')).toBe('example.com');
    expect(normalizeDomain('localhost')).toBeNull();
    expect(normalizeDomain('a..b')).toBeNull();
    expect(normalizeDomain('a b.com')).toBeNull();
    expect(normalizeDomain(`${'a'.repeat(64)}.com`)).toBeNull();
  });
});

describe('the policy file (RFC 8461 §3.2)', () => {
  const policy = (lines: string[], eol = '\r\n') => parsePolicy(lines.join(eol));

  it('reads enforce, testing and none, CRLF or LF, extensions ignored', () => {
    expect(
      policy(['version: STSv1', 'mode: enforce', 'mx: mx1.example.com', 'mx: *.Example.net.', 'max_age: 604800']),
    ).toEqual({ policy: { mode: 'enforce', mx: ['mx1.example.com', '*.example.net'], maxAge: 604800 } });
    expect(policy(['version: STSv1', 'mode: testing', 'mx: a.example', 'max_age: 86400', 'x-ext: 1'], '\n')).toEqual({
      policy: { mode: 'testing', mx: ['a.example'], maxAge: 86400 },
    });
    expect(policy(['version: STSv1', 'mode: none', 'max_age: 0'])).toEqual({
      policy: { mode: 'none', mx: [], maxAge: 0 },
    });
  });

  it('refuses anything else with a reason', () => {
    const base = ['version: STSv1', 'mode: enforce', 'mx: a.example', 'max_age: 86400'];
    const refused = (lines: string[]) => {
      const r = policy(lines);
      expect(r).toHaveProperty('error');
      return (r as { error: string }).error;
    };
    expect(refused(base.filter((l) => !l.startsWith('version')))).toBe('no version');
    expect(refused(['version: STSv2', ...base.slice(1)])).toContain('not STSv1');
    expect(refused([base[0]!, 'mode: strict', ...base.slice(2)])).toContain('not enforce, testing or none');
    expect(refused(base.filter((l) => !l.startsWith('mx')))).toBe('mode enforce names no mx');
    expect(refused([...base.slice(0, 3), 'max_age: 31557601'])).toContain('max_age');
    expect(refused([...base.slice(0, 3), 'max_age: -1'])).toContain('max_age');
    expect(refused([...base.slice(0, 3), 'max_age: 1e5'])).toContain('max_age');
    expect(refused([...base, 'mode: testing'])).toBe('mode given twice');
    expect(refused([...base, 'this line has no colon'])).toContain('key: value');
    expect(refused([...base, 'mx: bad host.example'])).toContain('malformed mx');
    expect(refused(['<html><body>hello</body></html>'])).toContain('key: value');
  });

  it('matches mx patterns one label deep', () => {
    expect(mxMatches('*.example.net', 'mx1.example.net')).toBe(true);
    expect(mxMatches('*.example.net', 'a.b.example.net')).toBe(false);
    const p = { id: 'a', mode: 'enforce' as const, mx: ['mx.good.test'], maxAge: 60 };
    expect(allowedHosts(p, ['mx.evil.test', 'mx.good.test'])).toEqual(['mx.good.test']);
  });
});
