import type { Resolver } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';
import { isNoRecord } from '../dns.js';
import { AppError } from '../errors.js';

/**
 * Addresses that caller-supplied destinations (webhook, route and tracking-webhook URLs, attachment
 * URLs, MX targets) must not reach. PRIVATE (loopback, RFC 1918, CGNAT 100.64/10, unique-local fc00::/7,
 * NAT64, benchmarking) opens up with ALLOW_PRIVATE_NETWORKS for local development and tests; NEVER
 * (unspecified, link-local such as cloud metadata at 169.254.169.254, multicast, reserved) never does.
 * IPv4-mapped and IPv4-compatible IPv6 are unwrapped first.
 */
const NEVER = subnets(
  [
    ['0.0.0.0', 8],
    ['169.254.0.0', 16],
    ['224.0.0.0', 4],
    ['240.0.0.0', 4],
  ],
  [
    ['::', 128],
    ['fe80::', 10],
    ['fec0::', 10],
    ['ff00::', 8],
  ],
);
const PRIVATE = subnets(
  [
    ['10.0.0.0', 8],
    ['100.64.0.0', 10],
    ['127.0.0.0', 8],
    ['172.16.0.0', 12],
    ['192.0.0.0', 24],
    ['192.168.0.0', 16],
    ['198.18.0.0', 15],
  ],
  // ::/96 covers ::1 and the deprecated IPv4-compatible form; 64:ff9b::/96 is NAT64 onto IPv4.
  [
    ['::', 96],
    ['64:ff9b::', 96],
    ['fc00::', 7],
  ],
);

function subnets(v4: [string, number][], v6: [string, number][]): BlockList {
  const list = new BlockList();
  for (const [net, prefix] of v4) list.addSubnet(net, prefix, 'ipv4');
  for (const [net, prefix] of v6) list.addSubnet(net, prefix, 'ipv6');
  return list;
}

/** True when `literal` (an IP address) must not be connected to; `allowPrivate` lifts only the PRIVATE ranges. Pure. */
export function isBlockedAddress(literal: string, allowPrivate = false): boolean {
  const address = literal.replace(/^\[|\]$/g, '').split('%')[0]!; // an IPv6 zone id (fe80::1%eth0) is not part of the address
  const family = isIP(address);
  if (family !== 4 && family !== 6) return true;
  const mapped = family === 6 ? mappedIpv4(address) : undefined;
  const [ip, type] =
    mapped !== undefined ? [mapped, 'ipv4' as const] : [address, family === 4 ? ('ipv4' as const) : ('ipv6' as const)];
  return NEVER.check(ip, type) || (!allowPrivate && PRIVATE.check(ip, type));
}

/** `::ffff:a.b.c.d` in any spelling → `a.b.c.d` (the URL parser canonicalizes IPv6 to `::ffff:xxxx:xxxx`). */
function mappedIpv4(address: string): string | undefined {
  let canonical: string;
  try {
    canonical = new URL(`http://[${address}]/`).hostname;
  } catch {
    return undefined;
  }
  const hex = /^\[::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})\]$/.exec(canonical);
  if (!hex) return undefined;
  const [hi, lo] = [parseInt(hex[1]!, 16), parseInt(hex[2]!, 16)];
  return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
}

export type CheckedAddress = { address: string; family: 4 | 6 };
export const blockedDestination = (host: string, what = 'Destination') =>
  new AppError(
    400,
    'destination_blocked',
    `${what} ${host} is an internal address (loopback, private, link-local or reserved); only public addresses are reached`,
  );

/**
 * Resolves a host name once (through DNS_SERVERS) and checks every answer; the caller connects to the
 * returned address, never to the name again, so a second DNS answer cannot redirect it (no rebinding).
 * IP literals are checked as they are; `localhost` is loopback without asking DNS.
 */
export async function resolveAllowed(
  hostname: string,
  opts: { resolver: Resolver; allowPrivate: boolean; what?: string },
): Promise<CheckedAddress> {
  const host = hostname
    .replace(/^\[|\]$/g, '')
    .toLowerCase()
    .replace(/\.$/, '');
  let answers: CheckedAddress[];
  const family = isIP(host);
  if (family === 4 || family === 6) answers = [{ address: host, family }];
  else if (host === 'localhost' || host.endsWith('.localhost')) answers = [{ address: '127.0.0.1', family: 4 }];
  else answers = await lookupAll(opts.resolver, host);
  if (answers.length === 0)
    throw new AppError(400, 'destination_unresolvable', `${opts.what ?? 'Destination'} ${host} has no address`);
  if (answers.some((a) => isBlockedAddress(a.address, opts.allowPrivate))) throw blockedDestination(host, opts.what);
  return answers[0]!;
}

async function lookupAll(resolver: Resolver, host: string): Promise<CheckedAddress[]> {
  const settle = (p: Promise<string[]>) =>
    p.catch((err: unknown) => {
      if (isNoRecord(err)) return [] as string[];
      throw new AppError(
        503,
        'dns_unavailable',
        `Could not resolve ${host} (${(err as NodeJS.ErrnoException).code ?? 'error'})`,
        true,
      );
    });
  const [v4, v6] = await Promise.all([settle(resolver.resolve4(host)), settle(resolver.resolve6(host))]);
  return [
    ...v4.map((address) => ({ address, family: 4 as const })),
    ...v6.map((address) => ({ address, family: 6 as const })),
  ];
}
