import { Resolver } from 'node:dns/promises';

/** Every DNS lookup of the service goes through DNS_SERVERS when set (DESIGN.md), else the system's. */
export function createResolver(servers: string[], timeoutMs = 3000): Resolver {
  const resolver = new Resolver({ timeout: timeoutMs, tries: 2 });
  if (servers.length > 0) resolver.setServers(servers);
  return resolver;
}

/** DNS "no such record" answers, as opposed to a resolver failure worth retrying. */
export function isNoRecord(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException)?.code;
  return code === 'ENODATA' || code === 'ENOTFOUND' || code === 'NXDOMAIN';
}
