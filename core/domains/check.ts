import type { Resolver } from 'node:dns/promises';

export type DomainChecks = { mx: boolean; spf: boolean; dkim: boolean; dmarc: boolean };

const stripDot = (s: string) => s.toLowerCase().replace(/\.$/, '');

async function txt(resolver: Resolver, name: string): Promise<string[]> {
  try {
    return (await resolver.resolveTxt(name)).map((chunks) => chunks.join(''));
  } catch {
    return []; // no record, or the resolver failed: either way not verified now; the loop checks again
  }
}

/** Looks up the four records of a domain through DNS_SERVERS and says which point at the service. */
export async function checkDomainRecords(resolver: Resolver, d: { domain: string; serviceDomain: string; selector: string; publicKeyB64: string }): Promise<DomainChecks> {
  const [mx, apex, dkim, dmarc] = await Promise.all([
    resolver.resolveMx(d.domain).catch(() => []),
    txt(resolver, d.domain),
    txt(resolver, `${d.selector}._domainkey.${d.domain}`),
    txt(resolver, `_dmarc.${d.domain}`),
  ]);
  const include = `include:${d.serviceDomain}`;
  return {
    mx: mx.some((r) => stripDot(r.exchange) === d.serviceDomain),
    spf: apex.some((v) => /^v=spf1(\s|$)/i.test(v) && v.toLowerCase().split(/\s+/).includes(include)),
    dkim: dkim.some((v) => dkimKeyOf(v) === d.publicKeyB64),
    dmarc: dmarc.some((v) => /^v=DMARC1\s*(;|$)/i.test(v)),
  };
}

/** The `p=` tag of a DKIM TXT value, whitespace removed. */
function dkimKeyOf(value: string): string | undefined {
  for (const tag of value.split(';')) {
    const [k, ...rest] = tag.split('=');
    if (k?.trim() === 'p') return rest.join('=').replace(/\s+/g, '');
  }
  return undefined;
}
