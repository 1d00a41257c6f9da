import { isIP } from 'node:net';

/**
 * Per-client limits key on an address, not on a socket: an IPv6 client gets a whole /64 from its ISP (it
 * can use a fresh address per request), so IPv6 keys on its first four groups; IPv4-mapped IPv6
 * (`::ffff:1.2.3.4`, what a dual-stack socket reports) is the IPv4 address it carries. Anything that is
 * not an address (an empty socket address, say) is its own key.
 */
export function clientKey(address: string): string {
  const bare = address
    .replace(/^\[|\]$/g, '')
    .split('%')[0]!
    .toLowerCase(); // a zone id (fe80::1%eth0) is not part of it
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/.exec(bare);
  if (mapped && isIP(mapped[1]!) === 4) return mapped[1]!;
  if (isIP(bare) !== 6) return bare;
  return `${expandIpv6(bare).slice(0, 4).join(':')}::/64`;
}

/** The eight 16-bit groups of an IPv6 address, as plain hex without leading zeros. */
function expandIpv6(address: string): string[] {
  let text = address;
  // A trailing dotted quad (::ffff:1.2.3.4 handled above; 64:ff9b::1.2.3.4 here) is two groups.
  const quad = /(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(text);
  if (quad) {
    const [a, b, c, d] = quad.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, quad.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.split('::') as [string, string | undefined];
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const zeros = tail === undefined ? [] : Array<string>(8 - left.length - right.length).fill('0');
  return [...left, ...zeros, ...right].map((g) => parseInt(g, 16).toString(16));
}

/** What express's `trust proxy` setting takes: false (the socket's address), a hop count, or trusted addresses. */
export type TrustProxy = boolean | number | string[];

const NAMED = new Set(['loopback', 'linklocal', 'uniquelocal']);

/**
 * TRUST_PROXY: unset or `false`, X-Forwarded-For is ignored (the client is the socket's peer); `true`, the
 * left-most address of the header (only behind a proxy that overwrites it); a number, that many proxy hops
 * in front of the service; otherwise a comma-separated list of proxy addresses, CIDR ranges or the names
 * `loopback`, `linklocal`, `uniquelocal`. Answers an error message for anything else.
 */
export function parseTrustProxy(value: string | undefined): TrustProxy | { error: string } {
  const v = (value ?? '').trim();
  if (v === '' || v === 'false' || v === '0') return false;
  if (v === 'true') return true;
  if (/^\d{1,2}$/.test(v)) return Number(v);
  const items = v
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  for (const item of items) {
    if (NAMED.has(item)) continue;
    const [ip, prefix, extra] = item.split('/');
    const family = isIP(ip ?? '');
    const maxPrefix = family === 4 ? 32 : 128;
    const prefixOk = prefix === undefined || (/^\d{1,3}$/.test(prefix) && Number(prefix) <= maxPrefix);
    if (!family || !prefixOk || extra !== undefined)
      return { error: `"${item}" is not an address, a CIDR range or loopback/linklocal/uniquelocal` };
  }
  return items;
}
