import { isIP } from 'node:net';
import { domainToASCII } from 'node:url';
import { badRequest } from '../errors.js';

const LABEL = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/;

/**
 * Normalizes a domain a user adds: trims, lowercases, converts IDN to punycode, drops a trailing dot.
 * Rejects IP addresses, single labels, malformed names and the service's own zone.
 */
export function normalizeDomainName(input: string, serviceDomain: string): string {
  const raw = input.trim().replace(/\.$/, '');
  if (raw === '') throw badRequest('domain is required', 'invalid_domain');
  if (isIP(raw.replace(/^\[|\]$/g, ''))) throw badRequest('An IP address is not a domain', 'invalid_domain');
  const ascii = domainToASCII(raw.toLowerCase());
  if (!ascii) throw badRequest(`"${input}" is not a valid domain name`, 'invalid_domain');
  const labels = ascii.split('.');
  if (labels.length < 2)
    throw badRequest('Use a full domain name such as example.com, not a single label', 'invalid_domain');
  if (ascii.length > 253 || !labels.every((l) => LABEL.test(l)) || /^\d+$/.test(labels.at(-1)!)) {
    throw badRequest(`"${input}" is not a valid domain name`, 'invalid_domain');
  }
  if (isWithin(ascii, serviceDomain)) {
    throw badRequest(
      `Domains under ${serviceDomain} are the service's own; claim a hosted subdomain instead`,
      'reserved_domain',
    );
  }
  return ascii;
}

/** Is `name` equal to `zone` or below it? */
export function isWithin(name: string, zone: string): boolean {
  return name === zone || name.endsWith(`.${zone}`);
}
