import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEFAULT_SHAPING_FILE, loadConfig } from '../core/config.js';
import { compileRule, loadShapingFile, parseShaping, ShapingFileError } from '../core/shaping/config.js';
import { effectiveLimits, siteFor, siteKeyOf } from '../core/shaping/sites.js';
import { parseCount, parseDuration, parseRate } from '../core/shaping/values.js';

describe('shaping value syntax (KumoMTA)', () => {
  it('reads rates with their burst', () => {
    expect(parseRate('300/min')).toEqual({ perSecond: 5, burst: 300, text: '300/min' });
    expect(parseRate('10/s')).toEqual({ perSecond: 10, burst: 10, text: '10/s' });
    expect(parseRate('3600/h').perSecond).toBe(1);
    expect(parseRate('86400/d').perSecond).toBe(1);
    expect(parseRate(' 2 / minute ').perSecond).toBeCloseTo(2 / 60);
    expect(parseRate(4)).toMatchObject({ perSecond: 4, burst: 4 });
    for (const bad of ['300', '300/fortnight', '/min', '0/s', '-1/s', 'ten/s', '', 0, null])
      expect(() => parseRate(bad), String(bad)).toThrow(/not a rate/);
  });

  it('reads durations', () => {
    expect(parseDuration('20s')).toBe(20_000);
    expect(parseDuration('15m')).toBe(900_000);
    expect(parseDuration('1h')).toBe(3_600_000);
    expect(parseDuration('2d')).toBe(172_800_000);
    expect(parseDuration('500ms')).toBe(500);
    expect(parseDuration('2 hours')).toBe(7_200_000);
    expect(parseDuration(90)).toBe(90_000);
    for (const bad of ['1w', 'h', '10', '', '1.2.3s', true])
      expect(() => parseDuration(bad), String(bad)).toThrow(/not a duration/);
  });

  it('reads counts', () => {
    expect(parseCount(5)).toBe(5);
    expect(parseCount('7')).toBe(7);
    for (const bad of [0, -1, 1.5, 'x', '']) expect(() => parseCount(bad)).toThrow(/whole number/);
  });
});

const FILE = `
["default"]
connection_limit = 4
max_deliveries_per_connection = 20

[["default".automation]]
regex = '^421[ -]'
action = "Suspend"
duration = "1m"

["example.com"]
max_message_rate = "300/min"
connection_limit = 2

[["example.com".automation]]
regex = '(?i)too many connections'
action = { SetConfig = { name = "connection_limit", value = "1" } }
duration = "20s"

["solo.example"]
mx_rollup = false
connection_limit = 1

[provider.google]
match = [{ MXSuffix = ".google.com" }, { DomainSuffix = ".gmail.test" }]
max_connection_rate = "10/s"

[[provider.google.automation]]
regex = '^4\\d\\d[ -]4\\.7\\.28'
action = ["Suspend", { SetConfig = { name = "max_message_rate", value = "10/min" } }]
duration = "15m"
`;

describe('shaping.toml', () => {
  const config = parseShaping(FILE, 'test.toml');

  it('reads the default, domain and provider tables and their rules', () => {
    expect(config.defaults).toEqual({
      connectionLimit: 4,
      maxMessageRate: null,
      maxConnectionRate: null,
      maxDeliveriesPerConnection: 20,
    });
    expect(config.defaultRules).toHaveLength(1);
    expect(config.domains.get('example.com')!.patch).toMatchObject({
      connectionLimit: 2,
      maxMessageRate: { perSecond: 5, burst: 300 },
    });
    expect(config.domains.get('solo.example')!.mxRollup).toBe(false);
    expect(config.providers[0]).toMatchObject({
      name: 'provider.google',
      mxSuffixes: ['.google.com'],
      domainSuffixes: ['.gmail.test'],
    });
    expect(config.providers[0]!.rules[0]!.actions).toEqual([
      { kind: 'suspend' },
      { kind: 'set', name: 'max_message_rate', value: '10/min' },
    ]);
    expect(config.providers[0]!.rules[0]!.durationMs).toBe(900_000);
  });

  it('keys a site by its sorted MX set, shared by domains with the same hosts', () => {
    const a = siteFor(config, 'a.test', ['MX2.host.test', 'mx1.host.test.'], new Map());
    const b = siteFor(config, 'b.test', ['mx1.host.test', 'mx2.host.test'], new Map());
    expect(a.key).toBe('mx1.host.test,mx2.host.test');
    expect(b.key).toBe(a.key);
    expect(a.limits.connectionLimit).toBe(4);
  });

  it('applies a domain table to its whole site (MX rollup), unless mx_rollup = false', () => {
    const hosts = ['mx.example.com'];
    const rollups = new Map([[siteKeyOf(hosts), config.domains.get('example.com')!]]);
    const hosted = siteFor(config, 'customer.test', hosts, rollups);
    expect(hosted.limits.connectionLimit).toBe(2);
    expect(hosted.sources).toEqual(['default', 'example.com']);
    const solo = siteFor(config, 'solo.example', hosts, rollups);
    expect(solo.key).toBe('domain:solo.example');
    expect(solo.limits.connectionLimit).toBe(1);
  });

  it('matches providers by MX host suffix or domain suffix, most specific rules first', () => {
    const g = siteFor(config, 'workspace.test', ['aspmx.l.google.com', 'alt1.aspmx.l.google.com'], new Map());
    expect(g.limits.maxConnectionRate?.perSecond).toBe(10);
    expect(g.rules.map((r) => r.table)).toEqual(['provider.google', 'default']);
    expect(siteFor(config, 'x.gmail.test', ['mx.other.test'], new Map()).sources).toContain('provider.google');
    expect(siteFor(config, 'x.test', ['mx.notgoogle.com'], new Map()).sources).toEqual(['default']);
  });

  it('lets SetConfig overrides in force replace the file limits', () => {
    const site = siteFor(config, 'x.test', ['mx.x.test'], new Map());
    const now = Date.now();
    const limits = effectiveLimits(
      site,
      {
        suspendedUntil: null,
        suspendCause: null,
        overrides: {
          connection_limit: { value: '1', until: now + 1000, cause: 'x' },
          max_message_rate: { value: '5/s', until: now - 1, cause: 'old' },
        },
      },
      now,
    );
    expect(limits.connectionLimit).toBe(1);
    expect(limits.maxMessageRate).toBeNull();
  });

  it('refuses a bad file with a message naming the table and key', () => {
    const bad: [string, RegExp][] = [
      ['["default"]\nconnection_limit = 0', /\["default"\] connection_limit: .*whole number/],
      ['["default"]\nmax_message_rate = "fast"', /max_message_rate: "fast" is not a rate/],
      ['["default"]\nconection_limit = 3', /unknown key "conection_limit"/],
      ['["example.com"]\nmx_rollup = "no"', /mx_rollup must be true or false/],
      ['[["x.com".automation]]\nregex = "a"\naction = "Pause"\nduration = "1m"', /action must be "Suspend"/],
      [
        '[["x.com".automation]]\nregex = "a"\naction = { SetConfig = { name = "speed", value = "1" } }\nduration = "1m"',
        /SetConfig name must be one of/,
      ],
      [
        '[["x.com".automation]]\nregex = "a"\naction = "Suspend"\nduration = "soon"',
        /duration: "soon" is not a duration/,
      ],
      ['[["x.com".automation]]\nregex = "(a+)+$"\naction = "Suspend"\nduration = "1m"', /nested quantifiers/],
      ['[["x.com".automation]]\nregex = "(a|ab)*c"\naction = "Suspend"\nduration = "1m"', /nested quantifiers/],
      ['[["x.com".automation]]\nregex = "(a)\\\\1"\naction = "Suspend"\nduration = "1m"', /back-references/],
      ['[["x.com".automation]]\nregex = "a(?=b)"\naction = "Suspend"\nduration = "1m"', /lookaround/],
      ['[["x.com".automation]]\nregex = "a["\naction = "Suspend"\nduration = "1m"', /regex/],
      ['["not a domain"]\nconnection_limit = 1', /is not a domain name/],
      ['[provider.x]\nconnection_limit = 1', /needs match/],
      ['["default"\nconnection_limit = 1', /not valid TOML/],
    ];
    for (const [text, message] of bad) {
      expect(() => parseShaping(text, 'bad.toml'), text).toThrow(ShapingFileError);
      expect(() => parseShaping(text, 'bad.toml'), text).toThrow(message);
    }
  });

  it('compiles rules linear in practice: (?i), classes and plain quantifiers are fine', () => {
    expect(compileRule('(?i)TOO many').test('421 too many connections')).toBe(true);
    expect(compileRule('^4\\d\\d[ -]4\\.7\\.28').test('421-4.7.28 rate limited')).toBe(true);
    expect(compileRule('\\[TSS04\\]').test('421 4.7.0 [TSS04] Messages temporarily deferred')).toBe(true);
    expect(compileRule('(?:4\\.7\\.0)? try [(]again[)]').source).toContain('try');
  });

  it('ships a default file that loads, with rules for the large providers and a generic 421', () => {
    const shipped = loadShapingFile(DEFAULT_SHAPING_FILE);
    const gmail = siteFor(
      shipped,
      'gmail.com',
      ['gmail-smtp-in.l.google.com', 'alt1.gmail-smtp-in.l.google.com'],
      new Map(),
    );
    const rule = (site: typeof gmail, answer: string) => site.rules.find((r) => r.regex.test(answer));
    expect(
      rule(gmail, '421-4.7.28 [192.0.2.1] Our system has detected an unusual rate of unsolicited mail')?.table,
    ).toBe('provider.google');
    expect(rule(gmail, '421 4.7.0 Try again later, closing connection.')?.table).toBe('provider.google');
    const outlook = siteFor(shipped, 'outlook.com', ['outlook-com.olc.protection.outlook.com'], new Map());
    expect(
      rule(outlook, '421 4.3.2 The maximum number of concurrent server connections has exceeded a limit')?.actions,
    ).toEqual([{ kind: 'set', name: 'connection_limit', value: '2' }]);
    const yahoo = siteFor(shipped, 'yahoo.com', ['mta5.am0.yahoodns.net'], new Map());
    expect(rule(yahoo, '421 4.7.0 [TSS04] Messages from 192.0.2.1 temporarily deferred')?.table).toBe('provider.yahoo');
    const other = siteFor(shipped, 'example.org', ['mx.example.org'], new Map());
    expect(rule(other, '421 4.4.2 closing channel')?.table).toBe('default');
    expect(rule(other, '451 4.3.0 try later')).toBeUndefined();
  });

  it('SHAPING_FILE names the file; a bad one stops startup with a clear error', () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-shaping-'));
    const env = (file: string) =>
      ({ SHAPING_FILE: file, DATA_DIR: dir, SECRET_KEY: 'x'.repeat(40) }) as NodeJS.ProcessEnv;
    expect(() => loadConfig(env(join(dir, 'missing.toml')))).toThrow(/SHAPING_FILE: .*missing\.toml: cannot read it/);
    writeFileSync(join(dir, 'bad.toml'), '["default"]\nmax_message_rate = "lots"\n');
    expect(() => loadConfig(env(join(dir, 'bad.toml')))).toThrow(
      /Invalid configuration:\n {2}SHAPING_FILE: .*bad\.toml: \["default"\] max_message_rate: "lots" is not a rate/,
    );
    writeFileSync(join(dir, 'ok.toml'), '["default"]\nconnection_limit = 3\n');
    expect(loadConfig(env(join(dir, 'ok.toml'))).shaping.defaults.connectionLimit).toBe(3);
    expect(loadConfig({ DATA_DIR: dir, SECRET_KEY: 'x'.repeat(40) } as NodeJS.ProcessEnv).shaping.file).toBe(
      DEFAULT_SHAPING_FILE,
    );
  });
});
