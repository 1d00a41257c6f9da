import type { Resolver } from 'node:dns/promises';
import { createServer, connect } from 'node:net';
import { networkInterfaces } from 'node:os';
import type { EgressConfig, EgressSource } from '../egress/config.js';
import { check, within, type CheckResult } from './checks.js';
import { reverseName } from './dns-checks.js';

const DNS_LIMIT_MS = 8_000;
/** How long a relay gets to accept a TCP connection. */
export const RELAY_CONNECT_MS = 4_000;
const stripDot = (s: string) => s.toLowerCase().replace(/\.$/, '');
const why = (err: unknown) => (err as NodeJS.ErrnoException).code ?? (err as Error).message;

/** True when `address` is one of this host's interface addresses, or can be bound (a loopback range, say). */
async function isLocal(address: string): Promise<'interface' | 'bindable' | false> {
  const listed = Object.values(networkInterfaces())
    .flat()
    .some((i) => i?.address === address);
  if (listed) return 'interface';
  const server = createServer();
  return new Promise((resolve) => {
    server.once('error', () => resolve(false));
    server.listen(0, address, () => server.close(() => resolve('bindable')));
  });
}

/** A TCP connection to host:port within `ms`: resolves with how long it took, rejects with the reason. */
function reach(host: string, port: number, ms: number): Promise<number> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port });
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no connection within ${ms} ms`));
    }, ms);
    socket.once('connect', () => {
      clearTimeout(timer);
      socket.destroy();
      resolve(Date.now() - started);
    });
    socket.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}

/**
 * A local source: its bind address is on this host, its reverse DNS names a host, that host resolves back
 * to the address, and the EHLO name it announces is that host. Receivers check the same three things; the
 * first that fails is the line's reason.
 */
async function checkBound(
  resolver: Resolver,
  source: EgressSource & { bindAddress: string },
  serviceDomain: string,
  where: string,
): Promise<CheckResult> {
  const ip = source.bindAddress;
  const ehlo = source.ehloName ?? serviceDomain;
  const c = check(`egress.source.${source.name}`, `egress source ${source.name} (${ip}, EHLO ${ehlo})`);
  const local = await isLocal(ip);
  if (!local)
    return c.fail(
      `${ip} is not an address of this host`,
      `add ${ip} to a network interface, or change bind_address of [source.${source.name}] in ${where}`,
    );
  const setPtr = `ask the owner of ${ip} (your hosting provider) to set its PTR to ${ehlo}`;
  let names: string[];
  try {
    names = (await within(DNS_LIMIT_MS, `PTR ${ip}`, () => resolver.resolvePtr(reverseName(ip)))).map(stripDot);
  } catch (err) {
    return c.fail(`${ip} has no PTR record (${why(err)})`, setPtr);
  }
  if (!names.length) return c.fail(`${ip} has no PTR record`, setPtr);
  const lookup = (fn: () => Promise<string[]>) => fn().catch(() => [] as string[]);
  const confirmed: string[] = [];
  const seen: string[] = [];
  for (const host of names) {
    const found = await within(DNS_LIMIT_MS, `A ${host}`, async () => [
      ...(await lookup(() => resolver.resolve4(host))),
      ...(await lookup(() => resolver.resolve6(host))),
    ]).catch(() => [] as string[]);
    seen.push(`${host} → ${found.join(', ') || 'nothing'}`);
    if (found.includes(ip)) confirmed.push(host);
  }
  if (!confirmed.length)
    return c.fail(
      `${ip} → ${names.join(', ')}, which does not resolve back to ${ip} (${seen.join('; ')})`,
      `publish ${ip.includes(':') ? 'AAAA' : 'A'} ${names[0]} ${ip}`,
    );
  if (!confirmed.includes(ehlo))
    return c.fail(
      `EHLO name ${ehlo} is not the host ${ip}'s reverse DNS names (${confirmed.join(', ')})`,
      `set ehlo_name = "${confirmed[0]}" in [source.${source.name}] of ${where}, or ${setPtr}`,
    );
  return c.ok(
    `${ip} is on this host${local === 'bindable' ? ' (a local route, not listed on an interface)' : ''}, ${ip} → ${ehlo} → ${ip}, EHLO ${ehlo}`,
  );
}

/**
 * `npm run doctor`'s egress lines (docs/operations.md), one per source of egress.toml, with the fix: a bound
 * source's address, reverse DNS and EHLO name; a relay's reachability (a warning, since the relay may be
 * down for a while); a source with neither is skipped (it sends from the host's default address, which the
 * `dns.ptr` check covers).
 */
export async function checkEgressSources(
  resolver: Resolver,
  egress: EgressConfig,
  serviceDomain: string,
): Promise<CheckResult[]> {
  const where = egress.file ?? 'egress.toml';
  return Promise.all(
    [...egress.sources.values()].map(async (source): Promise<CheckResult> => {
      const id = `egress.source.${source.name}`;
      if (source.relay) {
        const { host, port } = source.relay;
        const c = check(id, `egress source ${source.name} (relay ${host}:${port})`, false);
        try {
          const took = await reach(host, port, RELAY_CONNECT_MS);
          return c.ok(`${host}:${port} accepts a connection (${took} ms)`);
        } catch (err) {
          return c.warn(
            `cannot connect to ${host}:${port} (${why(err)})`,
            `check the relay's host and port in [source.${source.name}] of ${where}, and that this host may reach it`,
          );
        }
      }
      if (source.bindAddress)
        return checkBound(resolver, { ...source, bindAddress: source.bindAddress }, serviceDomain, where);
      return check(id, `egress source ${source.name}`, false).skipped(
        "no bind_address: mail leaves from the host's default address (see dns.ptr)",
      );
    }),
  );
}
