import { afterEach, describe, expect, it, vi } from 'vitest';
import { cachedResolve } from '../core/dns.js';

/** The scoring lookups' cache (core/dns.ts): what it keeps, for how long, and what it never keeps. */
function fakeResolver(answer: (name: string, rr: string) => unknown) {
  const asked: string[] = [];
  return {
    asked,
    resolve: (name: string, rr: string) => {
      asked.push(`${rr} ${name}`);
      try {
        return Promise.resolve(answer(name, rr));
      } catch (err) {
        return Promise.reject(err);
      }
    },
  };
}
const dnsError = (code: string) => Object.assign(new Error(code), { code });

afterEach(() => vi.useRealTimers());

describe('cachedResolve', () => {
  it('asks once per name and type within keepMs, again after it; names are case-insensitive', async () => {
    vi.useFakeTimers({ now: 1_000_000, toFake: ['Date'] });
    const r = fakeResolver((name) => [[`v=spf1 include:${name} -all`]]);
    const resolve = cachedResolve(r as never, 60_000);
    expect(await resolve('far.example', 'TXT')).toEqual([['v=spf1 include:far.example -all']]);
    expect(await resolve('FAR.example', 'TXT')).toEqual([['v=spf1 include:far.example -all']]);
    await resolve('far.example', 'MX');
    expect(r.asked).toEqual(['TXT far.example', 'MX far.example']);
    vi.setSystemTime(1_000_000 + 60_001);
    await resolve('far.example', 'TXT');
    expect(r.asked).toHaveLength(3);
  });

  it('keeps "no such record" but not a failure', async () => {
    const r = fakeResolver((name) => {
      throw dnsError(name.startsWith('_dmarc') ? 'ENOTFOUND' : 'ETIMEOUT');
    });
    const resolve = cachedResolve(r as never, 60_000);
    for (let i = 0; i < 3; i++) {
      await expect(resolve('_dmarc.far.example', 'TXT')).rejects.toMatchObject({ code: 'ENOTFOUND' });
      await expect(resolve('slow.example', 'TXT')).rejects.toMatchObject({ code: 'ETIMEOUT' });
    }
    expect(r.asked.filter((q) => q === 'TXT _dmarc.far.example')).toHaveLength(1);
    expect(r.asked.filter((q) => q === 'TXT slow.example')).toHaveLength(3);
  });

  it('gives each caller its own copy, and keeps at most max answers', async () => {
    const r = fakeResolver((name) => [[name]]);
    const resolve = cachedResolve(r as never, 60_000, 2);
    const first = (await resolve('a.example', 'TXT')) as string[][];
    first[0]!.push('changed by a caller');
    expect(await resolve('a.example', 'TXT')).toEqual([['a.example']]);
    await resolve('b.example', 'TXT');
    await resolve('c.example', 'TXT'); // a.example, the oldest, goes
    await resolve('a.example', 'TXT');
    expect(r.asked.filter((q) => q === 'TXT a.example')).toHaveLength(2);
  });
});
