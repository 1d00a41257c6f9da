import { builtinRecords, type DnsRecordOut } from './records.js';

export type ProviderDomain = { domain: string; dkimSelector: string; dkimPublicKey: string; sendingEnabled: boolean };

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
    records: (d) => builtinRecords(d.domain, { serviceDomain, selector: d.dkimSelector, publicKeyB64: d.dkimPublicKey }),
    enableSending: async (d) => ({ enabled: true, alreadyEnabled: d.sendingEnabled }),
    deregister: async () => undefined,
  };
}

export type ProviderRegistry = { default: SendingProvider; byId(id: string): SendingProvider | undefined; all(): SendingProvider[] };

export function createProviderRegistry(providers: SendingProvider[]): ProviderRegistry {
  const map = new Map(providers.map((p) => [p.id, p]));
  return { default: providers[0]!, byId: (id) => map.get(id), all: () => [...map.values()] };
}
