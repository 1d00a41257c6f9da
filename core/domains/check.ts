import type { Resolver } from 'node:dns/promises';
import { isNoRecord } from '../dns.js';
import { OWNERSHIP_LABEL, OWNERSHIP_PREFIX } from './ownership.js';

export type DomainChecks = { mx: boolean; spf: boolean; dkim: boolean; dmarc: boolean; ownership: boolean };
/**
 * What DNS said now: a check is undefined when its lookup failed (timeout, SERVFAIL), as opposed to "no record".
 * `mx`: the MX set names the row's own host; `sharedMx`: it names SERVICE_DOMAIN itself (proves nothing alone);
 * `ownership`: the account's `_svc-verify` TXT token (the alternative proof).
 */
export type DnsObservation = { [K in keyof DomainChecks | 'sharedMx']: boolean | undefined };

const stripDot = (s: string) => s.toLowerCase().replace(/\.$/, '');

/** A lookup's answer; [] when the name has no such record; undefined when the resolver failed. */
async function settle<T>(p: Promise<T[]>): Promise<T[] | undefined> {
  try {
    return await p;
  } catch (err) {
    return isNoRecord(err) ? [] : undefined;
  }
}
const txt = (resolver: Resolver, name: string) =>
  settle(resolver.resolveTxt(name)).then((rows) => rows?.map((chunks) => chunks.join('')));
const some = <T>(rows: T[] | undefined, test: (r: T) => boolean) => (rows === undefined ? undefined : rows.some(test));

/** Looks up the records of a domain through DNS_SERVERS and says which point at the service (and which could not be read). */
export async function checkDomainRecords(
  resolver: Resolver,
  d: {
    domain: string;
    serviceDomain: string;
    mxHost: string;
    selector: string;
    publicKeyB64: string;
    ownershipToken: string;
  },
): Promise<DnsObservation> {
  const [mx, apex, dkim, dmarc, owner] = await Promise.all([
    settle(resolver.resolveMx(d.domain)),
    txt(resolver, d.domain),
    txt(resolver, `${d.selector}._domainkey.${d.domain}`),
    txt(resolver, `_dmarc.${d.domain}`),
    txt(resolver, `${OWNERSHIP_LABEL}.${d.domain}`),
  ]);
  const include = `include:${d.serviceDomain}`;
  return {
    mx: some(mx, (r) => stripDot(r.exchange) === d.mxHost),
    sharedMx: some(mx, (r) => stripDot(r.exchange) === d.serviceDomain),
    spf: some(apex, (v) => /^v=spf1(\s|$)/i.test(v) && v.toLowerCase().split(/\s+/).includes(include)),
    dkim: some(dkim, (v) => dkimKeyOf(v) === d.publicKeyB64),
    dmarc: some(dmarc, (v) => /^v=DMARC1\s*(;|$)/i.test(v)),
    ownership: some(owner, (v) => v.trim() === `${OWNERSHIP_PREFIX}${d.ownershipToken}`),
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

/** Whether `<selector>._domainkey.<domain>` publishes `publicKeyB64` now; undefined when the lookup failed. */
export async function dkimKeyPublished(
  resolver: Resolver,
  d: { domain: string; selector: string; publicKeyB64: string },
): Promise<boolean | undefined> {
  return some(await txt(resolver, `${d.selector}._domainkey.${d.domain}`), (v) => dkimKeyOf(v) === d.publicKeyB64);
}
