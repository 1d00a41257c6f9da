import { deriveKey, hmacHex } from '../secrets.js';
import type { DnsRecordOut } from './records.js';

/** The label under a customer domain where the ownership token is published. */
export const OWNERSHIP_LABEL = '_svc-verify';
export const OWNERSHIP_PREFIX = 'svc-verify=';

/**
 * Ownership proof of a non-hosted domain: `_svc-verify.<domain> TXT "svc-verify=<token>"`, where the
 * token is derived from the account and the domain. MX, SPF and DKIM are the same for every account,
 * so they prove nothing about which account controls the zone; this record does.
 */
export function createOwnershipTokens(secretKey: string) {
  const key = deriveKey(secretKey, 'domain-ownership-v1');
  const token = (userId: string, domain: string) => hmacHex(key, `${userId}\n${domain.toLowerCase()}`).slice(0, 40);
  return {
    token,
    record: (userId: string, domain: string): DnsRecordOut => ({
      type: 'TXT',
      name: `${OWNERSHIP_LABEL}.${domain}`,
      value: `${OWNERSHIP_PREFIX}${token(userId, domain)}`,
    }),
  };
}
export type OwnershipTokens = ReturnType<typeof createOwnershipTokens>;
