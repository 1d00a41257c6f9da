import { createHmac, timingSafeEqual } from 'node:crypto';
import { deriveKey } from '../secrets.js';
import { BOUNCE_LABEL } from '../domains/records.js';

const ALPHABET = 'abcdefghijklmnopqrstuvwxyz234567';
const ID_BYTES = 18;
const MAC_BYTES = 10;
/** Local-part prefix of the mailto unsubscribe address: `unsubscribe+<token>@bounces.<sender domain>`. */
export const UNSUBSCRIBE_PREFIX = 'unsubscribe+';

function base32(buf: Buffer): string {
  let bits = 0;
  let value = 0;
  let out = '';
  for (const byte of buf) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += ALPHABET[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += ALPHABET[(value << (5 - bits)) & 31];
  return out;
}

function unbase32(s: string): Buffer | undefined {
  let bits = 0;
  let value = 0;
  const out: number[] = [];
  for (const ch of s.toLowerCase()) {
    const v = ALPHABET.indexOf(ch);
    if (v < 0) return undefined;
    value = (value << 5) | v;
    bits += 5;
    if (bits >= 8) {
      out.push((value >>> (bits - 8)) & 255);
      bits -= 8;
    }
  }
  return Buffer.from(out);
}

/**
 * Unsubscribe tokens: the contact id's 18 random bytes and a 10-byte HMAC, base32 (lowercase, 45
 * characters), so the token survives case-folding in a mail local part and fits its 64 characters.
 */
export function createUnsubscribeTokens(opts: { secretKey: string; publicUrl: string }) {
  const key = deriveKey(opts.secretKey, 'unsubscribe-v1');
  const mac = (id: Buffer) => createHmac('sha256', key).update(id).digest().subarray(0, MAC_BYTES);

  const token = (contactId: string) => {
    const id = Buffer.from(contactId.slice('ctc_'.length), 'base64url');
    return base32(Buffer.concat([id, mac(id)]));
  };
  return {
    token,
    /** The contact id a token stands for, or undefined when it is not one of ours. */
    contactOf(tok: string): string | undefined {
      if (tok.length !== 45) return undefined;
      const raw = unbase32(tok);
      if (!raw || raw.length !== ID_BYTES + MAC_BYTES) return undefined;
      const id = raw.subarray(0, ID_BYTES);
      if (!timingSafeEqual(mac(id), raw.subarray(ID_BYTES))) return undefined;
      return `ctc_${id.toString('base64url')}`;
    },
    /** The one-click URL and the mailto address for a contact of a broadcast sent from `senderDomain`. */
    links(contactId: string, senderDomain: string) {
      const t = token(contactId);
      return {
        url: `${opts.publicUrl}/unsubscribe/${t}`,
        mailto: `${UNSUBSCRIBE_PREFIX}${t}@${BOUNCE_LABEL}.${senderDomain}`,
      };
    },
  };
}
export type UnsubscribeTokens = ReturnType<typeof createUnsubscribeTokens>;

/** The token in an `unsubscribe+<token>@…` recipient, if it is one. */
export function unsubscribeTokenOf(address: string): string | undefined {
  const local = address.slice(0, address.lastIndexOf('@')).toLowerCase();
  return local.startsWith(UNSUBSCRIBE_PREFIX) ? local.slice(UNSUBSCRIBE_PREFIX.length) : undefined;
}

/** RFC 2369 + RFC 8058 headers of a broadcast message (both are DKIM-signed). */
export const unsubscribeHeaders = (links: { url: string; mailto: string }) => ({
  'List-Unsubscribe': `<${links.url}>, <mailto:${links.mailto}>`,
  'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click',
});
