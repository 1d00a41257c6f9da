import { createServer, type Server } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseEgress } from '../core/egress/config.js';
import { checkEgressSources } from '../core/operator/egress-checks.js';
import { reverseName } from '../core/operator/dns-checks.js';
import { formatReport } from '../core/operator/checks.js';
import { resolverFor, startTestDns } from './helpers/dns.js';

/**
 * The doctor's egress lines against a real DNS server on loopback: a bound source passes only when its
 * address is on this host, its PTR names a host that resolves back to it, and its EHLO name is that host.
 */
const SERVICE = 'mail.doctor.test';

describe('npm run doctor: egress sources', () => {
  let dns: Awaited<ReturnType<typeof startTestDns>>;
  let relay: Server;
  let relayPort: number;
  let closedPort: number;

  beforeAll(async () => {
    dns = await startTestDns();
    // The doctor connects and hangs up at once: the reset it leaves is expected.
    relay = createServer((s) => s.on('error', () => undefined).end('220 relay.doctor.test ESMTP\r\n'));
    await new Promise<void>((r) => relay.listen(0, '127.0.0.1', r));
    relayPort = (relay.address() as { port: number }).port;
    const probe = createServer();
    await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
    closedPort = (probe.address() as { port: number }).port;
    await new Promise<void>((r) => probe.close(() => r()));
  });
  afterAll(async () => {
    await new Promise<void>((r) => relay.close(() => r()));
    await dns.close();
  });

  const run = (toml: string) =>
    checkEgressSources(resolverFor(dns.server.address), parseEgress(toml, '/etc/svc/egress.toml'), SERVICE);
  const pool = (...names: string[]) =>
    `[pool.p]\nsources = [${names.map((n) => `"${n}"`).join(', ')}]\n[streams]\ntransactional = "p"\nbulk = "p"\n`;

  it('passes a source on 127.0.0.2 whose PTR, address and EHLO name agree', async () => {
    dns.zone.set(reverseName('127.0.0.2'), 'PTR', [{ value: 'mta2.doctor.test' }]);
    dns.zone.set('mta2.doctor.test', 'A', [{ value: '127.0.0.2' }]);
    const [line] = await run(
      `[source.ip2]\nbind_address = "127.0.0.2"\nehlo_name = "mta2.doctor.test"\n${pool('ip2')}`,
    );
    expect(line).toMatchObject({ id: 'egress.source.ip2', status: 'ok', required: true });
    expect(line!.detail).toContain('127.0.0.2 → mta2.doctor.test → 127.0.0.2, EHLO mta2.doctor.test');
  });

  it('fails an EHLO name that is not the host the reverse DNS names, with the fix', async () => {
    dns.zone.set(reverseName('127.0.0.2'), 'PTR', [{ value: 'mta2.doctor.test' }]);
    dns.zone.set('mta2.doctor.test', 'A', [{ value: '127.0.0.2' }]);
    // No ehlo_name: the source announces SERVICE_DOMAIN, which is not what 127.0.0.2's PTR names.
    const [line] = await run(`[source.ip2]\nbind_address = "127.0.0.2"\n${pool('ip2')}`);
    expect(line).toMatchObject({ id: 'egress.source.ip2', status: 'fail' });
    expect(line!.detail).toBe(`EHLO name ${SERVICE} is not the host 127.0.0.2's reverse DNS names (mta2.doctor.test)`);
    expect(line!.fix).toContain('set ehlo_name = "mta2.doctor.test" in [source.ip2] of /etc/svc/egress.toml');
  });

  it('fails a PTR naming a host that does not resolve back, and an address with no PTR', async () => {
    dns.zone.set(reverseName('127.0.0.3'), 'PTR', [{ value: 'elsewhere.doctor.test' }]);
    dns.zone.set('elsewhere.doctor.test', 'A', [{ value: '127.0.0.9' }]);
    dns.zone.remove(reverseName('127.0.0.4'));
    const results = await run(
      `[source.ip3]\nbind_address = "127.0.0.3"\nehlo_name = "elsewhere.doctor.test"\n` +
        `[source.ip4]\nbind_address = "127.0.0.4"\nehlo_name = "mta4.doctor.test"\n${pool('ip3', 'ip4')}`,
    );
    const ip3 = results.find((r) => r.id === 'egress.source.ip3')!;
    expect(ip3.status).toBe('fail');
    expect(ip3.detail).toMatch(/^127\.0\.0\.3 → elsewhere\.doctor\.test, which does not resolve back to 127\.0\.0\.3/);
    expect(ip3.detail).toContain('elsewhere.doctor.test → 127.0.0.9');
    expect(ip3.fix).toBe('publish A elsewhere.doctor.test 127.0.0.3');
    const ip4 = results.find((r) => r.id === 'egress.source.ip4')!;
    expect(ip4.status).toBe('fail');
    expect(ip4.detail).toMatch(/^127\.0\.0\.4 has no PTR record/);
    expect(ip4.fix).toContain('set its PTR to mta4.doctor.test');
  });

  it('fails an address that is not on this host, whatever its DNS says', async () => {
    dns.zone.set(reverseName('192.0.2.77'), 'PTR', [{ value: 'far.doctor.test' }]);
    dns.zone.set('far.doctor.test', 'A', [{ value: '192.0.2.77' }]);
    const [line] = await run(
      `[source.far]\nbind_address = "192.0.2.77"\nehlo_name = "far.doctor.test"\n${pool('far')}`,
    );
    expect(line).toMatchObject({
      id: 'egress.source.far',
      status: 'fail',
      detail: '192.0.2.77 is not an address of this host',
    });
    expect(line!.fix).toContain('change bind_address of [source.far] in /etc/svc/egress.toml');
  });

  it('skips a source without bind_address; a relay is reached or warned about, never failed', async () => {
    const results = await run(
      `[source.default]\n` +
        `[source.up]\nrelay = { host = "127.0.0.1", port = ${relayPort}, security = "none" }\n` +
        `[source.down]\nrelay = { host = "127.0.0.1", port = ${closedPort}, security = "none" }\n` +
        pool('default', 'up', 'down'),
    );
    expect(results.map((r) => [r.id, r.status, r.required])).toEqual([
      ['egress.source.default', 'skipped', false],
      ['egress.source.up', 'ok', false],
      ['egress.source.down', 'warn', false],
    ]);
    expect(results[1]!.detail).toMatch(new RegExp(`^127\\.0\\.0\\.1:${relayPort} accepts a connection`));
    expect(results[2]!.detail).toContain('ECONNREFUSED');
    expect(formatReport(results)).toContain('All required checks passed.');
  });
});
