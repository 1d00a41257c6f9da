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

/** Publishes the account's ownership token (`_svc-verify.<domain>` TXT) from the records the API returned. */
export function publishOwnership(zone: StaticZone, domain: string, records: { type: string; name: string; value: string }[]): void {
  const token = records.find((r) => r.type === 'TXT' && r.name === `_svc-verify.${domain}`);
  if (!token) throw new Error(`no ownership record for ${domain} in the API's DNS list`);
  zone.set(token.name, 'TXT', [{ value: token.value }]);
}
