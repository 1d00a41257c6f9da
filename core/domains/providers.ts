import { providerTypeOf, type EgressConfig } from '../egress/config.js';
import { builtinRecords, mxHostOf, type DnsRecordOut } from './records.js';

export type ProviderDomain = {
  domain: string;
  mxToken: string;
  dkimSelector: string;
  dkimPublicKey: string;
  sendingEnabled: boolean;
  /** A rotation's next key (published, not yet signing) and previous key (in its grace period). */
  dkimNextSelector?: string | null;
  dkimNextPublicKey?: string | null;
  dkimPrevSelector?: string | null;
  dkimPrevPublicKey?: string | null;
};

/** The DKIM keys published besides the signing one: the next key of a rotation, the previous one in its grace period. */
export const otherDkimKeys = (d: ProviderDomain) => [
  ...(d.dkimNextSelector && d.dkimNextPublicKey
    ? [{ selector: d.dkimNextSelector, publicKeyB64: d.dkimNextPublicKey }]
    : []),
  ...(d.dkimPrevSelector && d.dkimPrevPublicKey
    ? [{ selector: d.dkimPrevSelector, publicKeyB64: d.dkimPrevPublicKey }]
    : []),
];

/** A sending provider that can back a domain. The service assigns `type`; paid plans may pick an `id`. */
export type SendingProvider = {
  type: string;
  id: string;
  label: string;
  /** DNS records the provider needs published for the domain. */
  records(d: ProviderDomain): DnsRecordOut[];
  /** Turns on outbound sending once SPF and DKIM pass; idempotent. */
  enableSending(d: ProviderDomain): Promise<{ enabled: boolean; alreadyEnabled: boolean }>;
  /** Forgets the domain on the provider's side (best effort, at delete). */
  deregister(d: ProviderDomain): Promise<void>;
};

/** What the service's own MTA needs published for a domain (it signs with the domain's DKIM key). */
const ownRecords = (d: ProviderDomain, serviceDomain: string) =>
  builtinRecords(d.domain, {
    serviceDomain,
    mxHost: mxHostOf(d.mxToken, serviceDomain),
    selector: d.dkimSelector,
    publicKeyB64: d.dkimPublicKey,
    otherKeys: otherDkimKeys(d),
  });

/** Adds `include:<host>` terms to an SPF record, before its `all` term (or at the end without one). */
export function mergeSpf(spf: string, includes: string[]): string {
  const terms = spf.split(' ').filter(Boolean);
  const extra = includes.map((h) => `include:${h}`).filter((t) => !terms.includes(t));
  const all = terms.findIndex((t) => /^[-~?+]?all$/i.test(t));
  if (all < 0) return [...terms, ...extra].join(' ');
  return [...terms.slice(0, all), ...extra, ...terms.slice(all)].join(' ');
}

/**
 * The provider an egress pool is (docs/domains.md, Providers, pools and TLS): id = the pool's name, type
 * `relay` when a source of it is a smarthost, else `svc`. Its records are the built-in ones with each relay
 * source's SPF include merged into the SPF records (the domain's and its return path's) and each relay
 * source's own records (names relative to the domain) appended.
 */
export function poolProvider(egress: EgressConfig, pool: string, serviceDomain: string): SendingProvider {
  const sources = (egress.pools.get(pool)?.sources ?? [])
    .map((m) => egress.sources.get(m.source))
    .filter((s) => s?.relay !== undefined);
  const includes = [...new Set(sources.flatMap((s) => (s?.spfInclude ? [s.spfInclude] : [])))];
  const extra = sources.flatMap((s) => s?.records ?? []);
  return {
    type: providerTypeOf(egress, pool),
    id: pool,
    label: egress.pools.get(pool)?.label ?? pool,
    records: (d) => {
      const own = ownRecords(d, serviceDomain).map((r) =>
        r.type === 'TXT' && r.value.startsWith('v=spf1') && includes.length > 0
          ? { ...r, value: mergeSpf(r.value, includes) }
          : r,
      );
      const seen = new Set(own.map((r) => `${r.type} ${r.name} ${r.value}`));
      const added = extra
        .map((r) => ({ type: r.type, name: r.name === '@' ? d.domain : `${r.name}.${d.domain}`, value: r.value }))
        .filter((r) => !seen.has(`${r.type} ${r.name} ${r.value}`) && seen.add(`${r.type} ${r.name} ${r.value}`));
      return [...own, ...added];
    },
    enableSending: async (d) => ({ enabled: true, alreadyEnabled: d.sendingEnabled }),
    deregister: async () => undefined,
  };
}

export type ProviderRegistry = {
  /** The platform default: the transactional stream's pool. */
  default: SendingProvider;
  byId(id: string): SendingProvider | undefined;
  all(): SendingProvider[];
};

/** One provider per pool of the egress file; the default is the transactional stream's pool. */
export function createProviderRegistry(egress: EgressConfig, serviceDomain: string): ProviderRegistry {
  const map = new Map([...egress.pools.keys()].map((p) => [p, poolProvider(egress, p, serviceDomain)]));
  return {
    default: map.get(egress.streams.transactional)!,
    byId: (id) => map.get(id),
    all: () => [...map.values()],
  };
}
