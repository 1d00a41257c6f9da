import { isIP } from 'node:net';
import type { Resolver } from 'node:dns/promises';
import type { Route } from '../shaping/connections.js';
import { allowedHosts, type MtaStsPolicy } from '../mta-sts/policy.js';
import type { EgressConfig, EgressSource, Stream } from '../egress/config.js';

/** The pool a transaction leaves from: the one the sender chose (core/egress/router.ts), else its stream's. */
export function poolNameOf(egress: EgressConfig, ctx: { pool?: string; stream?: Stream } | undefined): string {
  if (ctx?.pool && egress.pools.has(ctx.pool)) return ctx.pool;
  return egress.streams[ctx?.stream ?? 'transactional'];
}

/** FNV-1a of a string: the same message picks the same source on every attempt. */
function hashOf(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193) >>> 0;
  return h;
}

/**
 * The sources of a pool in the order a message tries them: one picked by weight (deterministic per
 * message id), then the others in the file's order as fallbacks.
 */
export function sourcesInOrder(egress: EgressConfig, poolName: string, messageId: string): EgressSource[] {
  const members = egress.pools.get(poolName)?.sources ?? [];
  const total = members.reduce((n, m) => n + m.weight, 0);
  let point = total ? hashOf(messageId) % total : 0;
  let first = 0;
  for (const [i, m] of members.entries()) {
    if (point < m.weight) {
      first = i;
      break;
    }
    point -= m.weight;
  }
  const ordered = [members[first], ...members.filter((_, i) => i !== first)];
  return ordered.flatMap((m) => (m && egress.sources.get(m.source) ? [egress.sources.get(m.source)!] : []));
}

/** What the sender asks of a transaction's TLS (the sending domain's `tls`), with the recipient domain's MTA-STS policy. */
export type TlsDemand = { domainRequires: boolean; policy: MtaStsPolicy | null };

/**
 * How a source's connections are made for one recipient domain, and what TLS they must have: the
 * sending domain's requirement or an MTA-STS `enforce` policy ask for a verified session, and `enforce`
 * only to the MX hosts the policy names. Through a relay the requirement holds for the hop to the relay
 * (the relay delivers onwards). Answers a deferral reason when no host may be tried at all.
 */
export function routeOf(
  source: EgressSource,
  opts: { heloName: string; resolver: Resolver; domain: string; hosts: string[]; demand: TlsDemand },
): Route | { refused: string } {
  const { policy, domainRequires } = opts.demand;
  const enforce = policy?.mode === 'enforce';
  const why = enforce ? 'MTA-STS enforce' : 'TLS required by the sending domain';
  if (source.relay) {
    const r = source.relay;
    return {
      port: r.port,
      secure: r.security === 'tls',
      requireTLS: r.security === 'starttls',
      // The relay is given credentials: its certificate must be valid unless the operator chose `none`.
      rejectUnauthorized: r.security !== 'none',
      ...(r.username && r.password ? { auth: { user: r.username, pass: r.password } } : {}),
      addressOf: (host) => relayAddress(opts.resolver, host),
      ...(enforce || domainRequires ? { require: { why } } : {}),
    };
  }
  const base: Route = {
    name: source.ehloName ?? opts.heloName,
    ...(source.bindAddress ? { localAddress: source.bindAddress } : {}),
  };
  if (enforce) {
    const hosts = allowedHosts(policy, opts.hosts);
    if (!hosts.length)
      return {
        refused: `MTA-STS enforce: no MX host of ${opts.domain} (${opts.hosts.join(', ')}) matches the policy's mx (${policy.mx.join(', ')})`,
      };
    return { ...base, require: { why, hosts } };
  }
  return domainRequires ? { ...base, require: { why } } : base;
}

/** A relay's address: the operator named it in egress.toml, so private addresses are allowed. */
async function relayAddress(resolver: Resolver, host: string): Promise<string> {
  if (isIP(host)) return host;
  const [address] = await resolver.resolve4(host).catch(() => resolver.resolve6(host));
  if (!address) throw new Error(`relay ${host} has no address`);
  return address;
}
