import { Resolver } from 'node:dns/promises';
import { startDnsServer, type DnsServer } from '../../dns/server.js';
import { createStaticZone, type StaticZone } from '../../dns/static-zone.js';

/** A real DNS server on loopback whose records a test changes at will (the customer's DNS host). */
export async function startTestDns(): Promise<{ server: DnsServer; zone: StaticZone; close(): Promise<void> }> {
  const zone = createStaticZone();
  const server = await startDnsServer({ port: 0, lookup: zone.lookup });
  return { server, zone, close: () => server.close() };
}

/** A fresh resolver (no cache carried between tests) pointed at one loopback server. */
export function resolverFor(address: string): Resolver {
  const r = new Resolver({ timeout: 2000, tries: 1 });
  r.setServers([address]);
  return r;
}

type Listed = { type: string; name: string; value: string; priority?: number };

/** The MX record the API listed for `domain`: the domain row's own host, `<token>.mx.<SERVICE_DOMAIN>`. */
export function ownMxOf(domain: string, records: Listed[]): Listed {
  const mx = records.find((r) => r.type === 'MX' && r.name === domain);
  if (!mx) throw new Error(`no MX record for ${domain} in the API's DNS list`);
  return mx;
}

/** Publishes the domain's MX as the API listed it (what proves the zone is the account's). */
export function publishOwnMx(zone: StaticZone, domain: string, records: Listed[]): void {
  const mx = ownMxOf(domain, records);
  zone.set(domain, 'MX', [{ value: mx.value, priority: mx.priority ?? 10 }]);
}
