import { BlockList, isIP } from 'node:net';
import { badRequest } from '../errors.js';

/** A sender rule of a receiving domain (docs/inbound-policy.md). */
export type SenderRule = { kind: 'address' | 'domain' | 'ip'; value: string; action: 'block' | 'allow' };
export const RULE_KINDS = ['address', 'domain', 'ip'] as const;
export const RULE_ACTIONS = ['block', 'allow'] as const;

/** What the rules say of a sender: `allow` (wins over block and over the spam thresholds), `block`, or nothing. */
export type SenderVerdict = 'allow' | 'block' | undefined;

const MAX_VALUE = 320;
/** A domain name: labels of letters, digits and hyphens (checked label by label, no regex over outside input). */
function isDomainName(s: string): boolean {
  if (s.length === 0 || s.length > 253) return false;
  return s.split('.').every((label) => {
    if (label.length === 0 || label.length > 63 || label.startsWith('-') || label.endsWith('-')) return false;
    for (const c of label)
      if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c === '-' || c === '_')) return false;
    return true;
  });
}

/** `::ffff:1.2.3.4` (an IPv4 client on a dual-stack socket) is `1.2.3.4`. */
export function plainIp(ip: string): string {
  return ip.toLowerCase().startsWith('::ffff:') && isIP(ip.slice(7)) === 4 ? ip.slice(7) : ip;
}

/** An address or CIDR as `{ip, prefix, family}`; undefined when it is neither. */
function parseCidr(value: string): { ip: string; prefix: number; family: 'ipv4' | 'ipv6' } | undefined {
  const slash = value.indexOf('/');
  const ip = plainIp(slash < 0 ? value : value.slice(0, slash));
  const version = isIP(ip);
  if (version === 0) return undefined;
  const max = version === 4 ? 32 : 128;
  const rest = slash < 0 ? String(max) : value.slice(slash + 1);
  if (rest.length === 0 || rest.length > 3 || ![...rest].every((c) => c >= '0' && c <= '9')) return undefined;
  const prefix = Number(rest);
  if (prefix > max) return undefined;
  return { ip, prefix, family: version === 4 ? 'ipv4' : 'ipv6' };
}

/**
 * The stored form of a rule's value, or a 400: an address is lowercased and must have a local part and a
 * domain; a domain is lowercased without a leading `@` or `.` (it covers its subdomains); an IP is an IPv4
 * or IPv6 address or CIDR.
 */
export function normalizeRuleValue(kind: SenderRule['kind'], raw: string): string {
  const value = raw.trim().toLowerCase();
  if (value.length === 0 || value.length > MAX_VALUE)
    throw badRequest('value is empty or too long', 'validation_error');
  if (kind === 'address') {
    const at = value.lastIndexOf('@');
    if (at <= 0 || !isDomainName(value.slice(at + 1)) || /\s/.test(value))
      throw badRequest('value is not an email address', 'validation_error');
    return value;
  }
  if (kind === 'domain') {
    const name = value.startsWith('@') || value.startsWith('.') ? value.slice(1) : value;
    if (!isDomainName(name) || !name.includes('.')) throw badRequest('value is not a domain name', 'validation_error');
    return name;
  }
  const cidr = parseCidr(value);
  if (!cidr) throw badRequest('value is not an IP address or CIDR', 'validation_error');
  return cidr.prefix === (cidr.family === 'ipv4' ? 32 : 128) ? cidr.ip : `${cidr.ip}/${cidr.prefix}`;
}

/** One domain's rules compiled for matching: addresses and domains in sets, IPs and CIDRs in node's BlockList. */
export type CompiledRules = { judge(sender: { from?: string; headerFrom?: string; ip?: string }): SenderVerdict };

export function compileRules(rules: SenderRule[]): CompiledRules {
  const sets = {
    block: { address: new Set<string>(), domain: new Set<string>(), ip: new BlockList(), ips: 0 },
    allow: { address: new Set<string>(), domain: new Set<string>(), ip: new BlockList(), ips: 0 },
  };
  for (const r of rules) {
    const s = sets[r.action];
    if (r.kind === 'address') s.address.add(r.value);
    else if (r.kind === 'domain') s.domain.add(r.value);
    else {
      const c = parseCidr(r.value);
      if (!c) continue;
      s.ip.addSubnet(c.ip, c.prefix, c.family);
      s.ips++;
    }
  }
  const domainOf = (address: string) => address.slice(address.lastIndexOf('@') + 1).toLowerCase();
  /** The domain and each parent of it (`a.b.example.com`, `b.example.com`, `example.com`, `com`). */
  const inDomains = (set: Set<string>, name: string) => {
    if (set.size === 0 || !name) return false;
    let n = name;
    for (;;) {
      if (set.has(n)) return true;
      const dot = n.indexOf('.');
      if (dot < 0) return false;
      n = n.slice(dot + 1);
    }
  };
  const ipIn = (s: (typeof sets)['block'], ip: string | undefined) => {
    if (!ip || s.ips === 0) return false;
    const p = plainIp(ip);
    const v = isIP(p);
    return v !== 0 && s.ip.check(p, v === 4 ? 'ipv4' : 'ipv6');
  };
  const addressIn = (s: (typeof sets)['block'], address: string | undefined) =>
    Boolean(address) && (s.address.has(address!.toLowerCase()) || inDomains(s.domain, domainOf(address!)));
  return {
    judge({ from, headerFrom, ip }) {
      // Allow goes by what the sending server proved it holds: the envelope sender and the connecting IP.
      if (addressIn(sets.allow, from) || ipIn(sets.allow, ip)) return 'allow';
      if (addressIn(sets.block, from) || addressIn(sets.block, headerFrom) || ipIn(sets.block, ip)) return 'block';
      return undefined;
    },
  };
}
