import { randomBytes } from 'node:crypto';
import { dkimRecordValue } from './dkim.js';

export type DnsRecordOut = { type: 'MX' | 'TXT' | 'CNAME' | 'A'; name: string; value: string; priority?: number };

/** The label under a customer domain that receives asynchronous bounces (the return path). */
export const BOUNCE_LABEL = 'bounces';

/** The labels under SERVICE_DOMAIN that authorize it to receive a domain's DMARC reports (RFC 7489 §7.1). */
export const REPORT_LABEL = '_report._dmarc';

/** Where DMARC aggregate and TLS reports for the platform's domains are mailed (docs/feedback.md). */
export const dmarcReportAddress = (serviceDomain: string) => `dmarc@${serviceDomain}`;
export const tlsReportAddress = (serviceDomain: string) => `tlsrpt@${serviceDomain}`;

/** The label under SERVICE_DOMAIN that holds every domain row's own MX host. */
export const MX_LABEL = 'mx';

/** A domain row's own MX host: `<mx_token>.mx.<SERVICE_DOMAIN>`, answered with the ingress addresses. */
export const mxHostOf = (mxToken: string, serviceDomain: string) => `${mxToken}.${MX_LABEL}.${serviceDomain}`;

/** A fresh MX token: 20 lowercase hex characters (a DNS label), random per domain row. */
export const newMxToken = () => randomBytes(10).toString('hex');

/**
 * What the built-in provider (the service's own MTA) needs published for `domain`. The MX points to the
 * row's own host, so publishing it proves the zone is the account's (another account's row has another host).
 */
export function builtinRecords(
  domain: string,
  opts: {
    serviceDomain: string;
    mxHost: string;
    selector: string;
    publicKeyB64: string;
    /** Other DKIM keys published during a rotation: the next one (before the switch), the previous one (its grace period). */
    otherKeys?: { selector: string; publicKeyB64: string }[];
  },
): DnsRecordOut[] {
  const spf = `v=spf1 include:${opts.serviceDomain} ~all`;
  return [
    { type: 'MX', name: domain, value: opts.mxHost, priority: 10 },
    { type: 'TXT', name: domain, value: spf },
    { type: 'TXT', name: `${opts.selector}._domainkey.${domain}`, value: dkimRecordValue(opts.publicKeyB64) },
    ...(opts.otherKeys ?? []).map((k) => ({
      type: 'TXT' as const,
      name: `${k.selector}._domainkey.${domain}`,
      value: dkimRecordValue(k.publicKeyB64),
    })),
    {
      type: 'TXT',
      name: `_dmarc.${domain}`,
      value: `v=DMARC1; p=none; rua=mailto:${dmarcReportAddress(opts.serviceDomain)}`,
    },
    // Optional: receivers mail their TLS reports (RFC 8460) about this domain's inbound sessions here.
    {
      type: 'TXT',
      name: `_smtp._tls.${domain}`,
      value: `v=TLSRPTv1; rua=mailto:${tlsReportAddress(opts.serviceDomain)}`,
    },
    { type: 'MX', name: `${BOUNCE_LABEL}.${domain}`, value: opts.serviceDomain, priority: 10 },
    { type: 'TXT', name: `${BOUNCE_LABEL}.${domain}`, value: spf },
  ];
}
