/**
 * MTA-STS (RFC 8461) as the outbound transport applies it (docs/transport-policy.md). The policy of a
 * recipient domain is fetched and cached by a workflow (core/mta-sts/), never per message; the transport
 * asks a lookup for what is cached and is told to wait briefly while a first fetch runs.
 */
export type MtaStsMode = 'enforce' | 'testing' | 'none';
export type MtaStsPolicy = { id: string; mode: MtaStsMode; mx: string[]; maxAge: number };

/** What the transport learns about a recipient domain: its policy (or none), or to wait while it is fetched. */
export type MtaStsAnswer = { policy: MtaStsPolicy | null } | { pending: true; waitMs: number; cause: string };

export type MtaStsLookup = {
  /** The policy in force for `domain`: cached, or none; starts a fetch when the cache is missing or stale. */
  policyFor(domain: string): Promise<MtaStsAnswer>;
};

/** No lookup at all: every domain as if it published no policy (capture and relay modes, unit tests). */
export const noMtaSts: MtaStsLookup = { policyFor: async () => ({ policy: null }) };

/**
 * RFC 8461 §4.1: an `mx` pattern matches a host name exactly, or `*.example.net` matches one more label
 * on the left (`mx1.example.net`, not `a.b.example.net` nor `example.net`). Both lowercased, no trailing dot.
 */
export function mxMatches(pattern: string, host: string): boolean {
  const p = pattern.toLowerCase().replace(/\.$/, '');
  const h = host.toLowerCase().replace(/\.$/, '');
  if (!p.startsWith('*.')) return p === h;
  const dot = h.indexOf('.');
  return dot > 0 && h.slice(dot + 1) === p.slice(2);
}

/** The MX hosts (in preference order) an `enforce` or `testing` policy lets mail go to. */
export const allowedHosts = (policy: MtaStsPolicy, hosts: string[]) =>
  hosts.filter((h) => policy.mx.some((p) => mxMatches(p, h)));
