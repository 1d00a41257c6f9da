import { dkimRecordValue } from './dkim.js';

export type DnsRecordOut = { type: 'MX' | 'TXT' | 'CNAME' | 'A'; name: string; value: string; priority?: number };

/** The label under a customer domain that receives asynchronous bounces (the return path). */
export const BOUNCE_LABEL = 'bounces';

/** What the built-in provider (the service's own MTA) needs published for `domain`. */
export function builtinRecords(domain: string, opts: { serviceDomain: string; selector: string; publicKeyB64: string }): DnsRecordOut[] {
  const spf = `v=spf1 include:${opts.serviceDomain} ~all`;
  return [
    { type: 'MX', name: domain, value: opts.serviceDomain, priority: 10 },
    { type: 'TXT', name: domain, value: spf },
    { type: 'TXT', name: `${opts.selector}._domainkey.${domain}`, value: dkimRecordValue(opts.publicKeyB64) },
    { type: 'TXT', name: `_dmarc.${domain}`, value: `v=DMARC1; p=none; rua=mailto:dmarc@${opts.serviceDomain}` },
    { type: 'MX', name: `${BOUNCE_LABEL}.${domain}`, value: opts.serviceDomain, priority: 10 },
    { type: 'TXT', name: `${BOUNCE_LABEL}.${domain}`, value: spf },
  ];
}
