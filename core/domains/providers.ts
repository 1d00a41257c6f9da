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

/** The built-in provider: the service's own MTA, signing with the domain's DKIM key. */
export function builtinProvider(serviceDomain: string): SendingProvider {
  return {
    type: 'svc',
    id: 'svc-mta',
    label: 'Built-in MTA',
    records: (d) =>
      builtinRecords(d.domain, {
        serviceDomain,
        mxHost: mxHostOf(d.mxToken, serviceDomain),
        selector: d.dkimSelector,
        publicKeyB64: d.dkimPublicKey,
        otherKeys: otherDkimKeys(d),
      }),
    enableSending: async (d) => ({ enabled: true, alreadyEnabled: d.sendingEnabled }),
    deregister: async () => undefined,
  };
}

export type ProviderRegistry = {
  default: SendingProvider;
  byId(id: string): SendingProvider | undefined;
  all(): SendingProvider[];
};

export function createProviderRegistry(providers: SendingProvider[]): ProviderRegistry {
  const map = new Map(providers.map((p) => [p.id, p]));
  return { default: providers[0]!, byId: (id) => map.get(id), all: () => [...map.values()] };
}
