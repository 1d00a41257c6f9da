import type { Resolver } from 'node:dns/promises';
import { BOUNCE_LABEL, MX_LABEL } from '../domains/records.js';
import { check, within, type CheckResult } from './checks.js';
import { SERVICE_DKIM_SELECTOR, serviceDomainRecords, serviceSpf } from '../domains/service-domain.js';

const DNS_LIMIT_MS = 8_000;
const stripDot = (s: string) => s.toLowerCase().replace(/\.$/, '');
const publish = (type: string, name: string, value: string) => `publish ${type} ${name} "${value}"`;

async function txt(resolver: Resolver, name: string): Promise<string[]> {
  return (await within(DNS_LIMIT_MS, `TXT ${name}`, () => resolver.resolveTxt(name))).map((chunks) => chunks.join(''));
}
const why = (err: unknown) => (err as NodeJS.ErrnoException).code ?? (err as Error).message;

/** The `p=` tag of a DKIM TXT value, whitespace removed. */
function dkimKeyOf(value: string): string | undefined {
  const tag = value
    .split(';')
    .map((t) => t.trim())
    .find((t) => t.startsWith('p='));
  return tag?.slice(2).replace(/\s+/g, '');
}

/**
 * SERVICE_DOMAIN's records as seen through DNS_SERVERS, one check each: its MX (the host customers'
 * MX points to) and address, the SPF customers include, the DKIM key of system mail, DMARC, and the
 * `bounces.` return path; then the reverse DNS of PUBLIC_IP.
 */
export async function checkServiceDns(
  resolver: Resolver,
  opts: { domain: string; publicKeyB64: string | null; publicIp?: string },
): Promise<CheckResult[]> {
  const d = opts.domain;
  const bounces = `${BOUNCE_LABEL}.${d}`;
  const mx = async (name: string, id: string, what: string) => {
    const c = check(id, what);
    const fix = publish('MX', name, `10 ${d}`);
    try {
      const found = (await within(DNS_LIMIT_MS, `MX ${name}`, () => resolver.resolveMx(name))).map((r) =>
        stripDot(r.exchange),
      );
      return found.includes(d)
        ? c.ok(`MX ${name} → ${d}`)
        : c.fail(`MX ${name} points to ${found.join(', ') || 'nothing'}, not ${d}`, fix);
    } catch (err) {
      return c.fail(`no MX at ${name} (${why(err)})`, fix);
    }
  };
  const spf = async (
    name: string,
    id: string,
    what: string,
    expected: string,
    accepts: (tokens: string[]) => boolean,
  ) => {
    const c = check(id, what);
    try {
      const records = (await txt(resolver, name)).filter((v) => /^v=spf1(\s|$)/i.test(v));
      if (records.length === 0) return c.fail(`no SPF record at ${name}`, publish('TXT', name, expected));
      if (records.length > 1)
        return c.fail(
          `${records.length} SPF records at ${name} (receivers treat that as an error)`,
          `keep one: ${expected}`,
        );
      return accepts(records[0]!.toLowerCase().split(/\s+/))
        ? c.ok(`TXT ${name} "${records[0]}"`)
        : c.fail(`SPF at ${name} is "${records[0]}"`, `publish TXT ${name} "${expected}" instead`);
    } catch (err) {
      return c.fail(`no SPF record at ${name} (${why(err)})`, publish('TXT', name, expected));
    }
  };
  const ip = opts.publicIp;
  const ipToken = ip ? `${ip.includes(':') ? 'ip6' : 'ip4'}:${ip}` : undefined;
  return Promise.all([
    mx(d, 'dns.mx', `MX of ${d} (inbound mail; customers' MX points to this host)`),
    checkAddress(resolver, d, ip),
    checkRowMxHosts(resolver, d, ip),
    spf(
      d,
      'dns.spf',
      `SPF of ${d} (the target of customers' include:${d})`,
      serviceSpf(ip),
      (t) => !ipToken || t.includes(ipToken) || t.includes('a') || t.includes('mx'),
    ),
    checkDkim(resolver, d, opts.publicKeyB64),
    checkDmarc(resolver, d),
    mx(bounces, 'dns.bounces-mx', `MX of ${bounces} (the return path of system mail)`),
    spf(
      bounces,
      'dns.bounces-spf',
      `SPF of ${bounces}`,
      `v=spf1 include:${d} ~all`,
      (t) => t.includes(`include:${d}`) || t.includes('a') || t.includes('mx'),
    ),
    checkPtr(resolver, d, ip),
  ]);
}

/** The address of SERVICE_DOMAIN (an MX target must resolve); with PUBLIC_IP set, it must be that address. */
async function checkAddress(resolver: Resolver, d: string, ip: string | undefined): Promise<CheckResult> {
  const c = check('dns.address', `address of ${d}`);
  const fix = ip
    ? `publish ${ip.includes(':') ? 'AAAA' : 'A'} ${d} ${ip}`
    : `publish A ${d} <your public IPv4> (and set PUBLIC_IP)`;
  const lookup = (fn: () => Promise<string[]>) => within(DNS_LIMIT_MS, `A ${d}`, fn).catch(() => [] as string[]);
  const found = [...(await lookup(() => resolver.resolve4(d))), ...(await lookup(() => resolver.resolve6(d)))];
  if (found.length === 0) return c.fail(`${d} has no A/AAAA record`, fix);
  if (ip && !found.includes(ip)) return c.fail(`${d} resolves to ${found.join(', ')}, not PUBLIC_IP ${ip}`, fix);
  return c.ok(`${d} → ${found.join(', ')}`);
}

/**
 * Every domain row's own MX host `<token>.mx.<SERVICE_DOMAIN>` must resolve to the ingress: a wildcard record
 * `*.mx.<SERVICE_DOMAIN>` (the built-in DNS server answers it when the zone is delegated to it). Checked with a probe label.
 */
async function checkRowMxHosts(resolver: Resolver, d: string, ip: string | undefined): Promise<CheckResult> {
  const probe = `doctor-probe.${MX_LABEL}.${d}`;
  const c = check('dns.mx-hosts', `the domains' own MX hosts (*.${MX_LABEL}.${d}; customers' MX points to one each)`);
  const fix = `publish A *.${MX_LABEL}.${d} ${ip ?? '<the ingress IPv4 address>'} (a wildcard record)`;
  const lookup = (fn: () => Promise<string[]>) => within(DNS_LIMIT_MS, `A ${probe}`, fn).catch(() => [] as string[]);
  const found = [...(await lookup(() => resolver.resolve4(probe))), ...(await lookup(() => resolver.resolve6(probe)))];
  if (found.length === 0) return c.fail(`${probe} has no address`, fix);
  if (ip && !found.includes(ip)) return c.fail(`${probe} resolves to ${found.join(', ')}, not PUBLIC_IP ${ip}`, fix);
  return c.ok(`*.${MX_LABEL}.${d} → ${found.join(', ')}`);
}

async function checkDkim(resolver: Resolver, d: string, publicKeyB64: string | null): Promise<CheckResult> {
  const name = `${SERVICE_DKIM_SELECTOR}._domainkey.${d}`;
  const c = check('dns.dkim', `DKIM key of system mail (${name})`);
  if (!publicKeyB64)
    return c.fail(
      'the service domain has no DKIM key yet',
      'start the service once (it creates the key at first boot), then run the doctor again',
    );
  const expected = serviceDomainRecords(d, { publicKeyB64 }).find((r) => r.name === name)!.value;
  try {
    const found = await txt(resolver, name);
    if (found.some((v) => dkimKeyOf(v) === publicKeyB64)) return c.ok(`TXT ${name} carries the service's key`);
    return c.fail(
      found.length ? `TXT ${name} carries a different key` : `no TXT at ${name}`,
      publish('TXT', name, expected),
    );
  } catch (err) {
    return c.fail(`no TXT at ${name} (${why(err)})`, publish('TXT', name, expected));
  }
}

async function checkDmarc(resolver: Resolver, d: string): Promise<CheckResult> {
  const name = `_dmarc.${d}`;
  const c = check('dns.dmarc', `DMARC of ${d}`);
  const fix = publish('TXT', name, 'v=DMARC1; p=quarantine; adkim=r; aspf=r');
  try {
    const found = (await txt(resolver, name)).filter((v) => /^v=DMARC1\s*(;|$)/i.test(v));
    return found.length === 1
      ? c.ok(`TXT ${name} "${found[0]}"`)
      : c.fail(found.length ? `${found.length} DMARC records at ${name}` : `no DMARC record at ${name}`, fix);
  } catch (err) {
    return c.fail(`no DMARC record at ${name} (${why(err)})`, fix);
  }
}

/** Reverse DNS of PUBLIC_IP: receivers distrust mail from an address whose PTR does not name the sending host. */
async function checkPtr(resolver: Resolver, d: string, ip: string | undefined): Promise<CheckResult> {
  const c = check('dns.ptr', 'reverse DNS (PTR) of the public address', Boolean(ip));
  if (!ip)
    return c.skipped('PUBLIC_IP is not set, so there is no address to check (set it to the address mail leaves from)');
  const fix = `ask the owner of ${ip} (your hosting provider) to set its PTR to ${d}`;
  try {
    // resolvePtr on the arpa name asks DNS_SERVERS only (reverse() would answer from /etc/hosts first).
    const names = (await within(DNS_LIMIT_MS, `PTR ${ip}`, () => resolver.resolvePtr(reverseName(ip)))).map(stripDot);
    return names.includes(d) ? c.ok(`${ip} → ${d}`) : c.fail(`${ip} → ${names.join(', ') || 'nothing'}, not ${d}`, fix);
  } catch (err) {
    return c.fail(`${ip} has no PTR record (${why(err)})`, fix);
  }
}

/** The in-addr.arpa / ip6.arpa name whose PTR record names the host of `ip`. */
export function reverseName(ip: string): string {
  if (!ip.includes(':')) return `${ip.split('.').reverse().join('.')}.in-addr.arpa`;
  const [head = '', tail = ''] = ip.split('::');
  const groups = (part: string) => (part ? part.split(':') : []);
  const fill = Array(8 - groups(head).length - groups(tail).length).fill('0');
  const nibbles = [...groups(head), ...(ip.includes('::') ? fill : []), ...groups(tail)]
    .map((g) => g.padStart(4, '0'))
    .join('');
  return `${[...nibbles].reverse().join('.')}.ip6.arpa`;
}
