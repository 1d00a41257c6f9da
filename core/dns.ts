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

/** A lookup as mailauth makes it: a name and a record type, answered as `Resolver.resolve` answers. */
export type Resolve = (name: string, rrtype: string) => Promise<unknown>;

/**
 * `resolver.resolve` with its answers kept for `keepMs` in this process, at most `max` of them (the oldest
 * go first): an answer and a "no such record" are kept, a failure (a timeout, SERVFAIL) is not. Node's resolver
 * does not tell a TXT record's TTL, so `keepMs` stands for it: a change to a record is seen within it. Each
 * caller gets its own copy of an answer.
 */
export function cachedResolve(resolver: Pick<Resolver, 'resolve'>, keepMs: number, max = 10_000): Resolve {
  const kept = new Map<string, { until: number; answer: Promise<unknown> }>();
  return (name, rrtype) => {
    const key = `${rrtype} ${name.toLowerCase()}`;
    const now = Date.now();
    const hit = kept.get(key);
    if (hit && hit.until > now) return hit.answer.then((v) => structuredClone(v));
    const answer = resolver.resolve(name, rrtype) as Promise<unknown>;
    kept.delete(key);
    kept.set(key, { until: now + keepMs, answer });
    if (kept.size > max) kept.delete(kept.keys().next().value!);
    answer.catch((err: unknown) => {
      if (!isNoRecord(err) && kept.get(key)?.answer === answer) kept.delete(key);
    });
    return answer.then((v) => structuredClone(v));
  };
}
