import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * The Sender Rewriting Scheme (SRS, after libsrs2's address format): a forward leaves with the envelope
 * sender `SRS0=<hash>=<tt>=<original domain>=<original local>@<forwarding domain>`, so the destination's
 * SPF check is of the forwarding domain, and a bounce to that address comes back here to be returned to
 * the original sender. An address already in SRS form is not wrapped twice: `SRS0=…@a` forwarded again
 * becomes `SRS1=<hash>=a==<the rest>@<us>` (libsrs2's "guarded" form), which reverses to `SRS0=…@a`.
 *
 * - `<tt>`: the day the address was made, two base32 characters (days since the epoch modulo 1024, as
 *   libsrs2), so an address is good for `SRS_MAX_AGE_DAYS` and refused after.
 * - `<hash>`: the first 8 base32 characters (40 bits) of an HMAC-SHA256 over the other fields, each
 *   lowercased and separated by a NUL byte (no two field lists hash alike), keyed by a key derived from
 *   SECRET_KEY. Compared in constant time, case-insensitively (MTAs may change an address's case).
 *
 * Why not the `srs.js` package: one release (0.1.0), no types, a 16-bit SHA-1 hash over fields joined
 * without separators, a case-sensitive comparison that is not constant-time, and its SRS1 form drops the
 * configured separator; the format is a page of code.
 */
export const SRS_MAX_AGE_DAYS = 21;
const B32 = 'abcdefghijklmnopqrstuvwxyz234567';
const DAY_MS = 86_400_000;
const SLOTS = 1024;
const HASH_CHARS = 8;

export type Srs = {
  /** The SRS envelope sender of a forward of mail from `sender` ('' for a null sender: not rewritten). */
  forward(sender: string, forwardingDomain: string, now?: number): string;
  /**
   * The address an SRS address stands for; `forged` when its hash is wrong, `expired` past the maximum
   * age, `undefined` when it is not an SRS address at all.
   */
  reverse(address: string, now?: number): { address: string } | 'forged' | 'expired' | undefined;
};

/** Whether a local part has the SRS form (a cheap check before `reverse`). */
export const isSrsLocal = (local: string) => /^srs[01][=+-]/i.test(local);

export function createSrs(key: Buffer, maxAgeDays = SRS_MAX_AGE_DAYS): Srs {
  const hash = (...fields: string[]) => {
    const h = createHmac('sha256', key);
    for (const f of fields) h.update(f.toLowerCase()).update('\0');
    return base32(h.digest()).slice(0, HASH_CHARS);
  };
  const matches = (given: string, ...fields: string[]) => {
    const want = Buffer.from(hash(...fields));
    const got = Buffer.from(given.toLowerCase());
    return got.length === want.length && timingSafeEqual(got, want);
  };
  return {
    forward(sender, forwardingDomain, now = Date.now()) {
      if (!sender) return '';
      const at = sender.lastIndexOf('@');
      if (at <= 0) return sender;
      const local = sender.slice(0, at);
      const domain = sender.slice(at + 1);
      if (domain.toLowerCase() === forwardingDomain.toLowerCase() && isSrsLocal(local)) return sender;
      if (/^srs0[=+-]/i.test(local)) {
        const guarded = local.slice(4);
        return `SRS1=${hash(domain, guarded)}=${domain}=${guarded}@${forwardingDomain}`;
      }
      if (/^srs1[=+-]/i.test(local)) {
        // SRS1=<hash>=<first forwarder>=<rest>: keep the first forwarder, re-hash for us.
        const [, , first, ...rest] = local.split('=');
        if (first === undefined || rest.length === 0) return sender;
        return `SRS1=${hash(first, rest.join('='))}=${first}=${rest.join('=')}@${forwardingDomain}`;
      }
      const tt = stamp(now);
      return `SRS0=${hash(tt, domain, local)}=${tt}=${domain}=${local}@${forwardingDomain}`;
    },
    reverse(address, now = Date.now()) {
      const at = address.lastIndexOf('@');
      const local = at < 0 ? address : address.slice(0, at);
      if (!isSrsLocal(local)) return undefined;
      const fields = local.slice(5).split('=');
      if (/^srs1/i.test(local)) {
        const [given, first, ...rest] = fields;
        if (!given || !first || rest.length === 0) return 'forged';
        const guarded = rest.join('=');
        if (!matches(given, first, guarded)) return 'forged';
        return { address: `SRS0${guarded}@${first}` };
      }
      const [given, tt, domain, ...rest] = fields;
      const origLocal = rest.join('=');
      if (!given || !tt || !domain || !origLocal) return 'forged';
      if (!matches(given, tt, domain, origLocal)) return 'forged';
      if (ageDays(tt, now) > maxAgeDays) return 'expired';
      return { address: `${origLocal}@${domain}` };
    },
  };
}

/** Days since the epoch, modulo 1024, as two base32 characters. */
function stamp(now: number): string {
  const day = Math.floor(now / DAY_MS) % SLOTS;
  return B32[day >> 5]! + B32[day & 31]!;
}

/** How many days ago a stamp was made (stamps wrap every 1024 days; a future stamp is a past cycle's). */
function ageDays(tt: string, now: number): number {
  const lower = tt.toLowerCase();
  if (lower.length !== 2) return Infinity;
  const hi = B32.indexOf(lower[0]!);
  const lo = B32.indexOf(lower[1]!);
  if (hi < 0 || lo < 0) return Infinity;
  const today = Math.floor(now / DAY_MS) % SLOTS;
  return (today - ((hi << 5) | lo) + SLOTS) % SLOTS;
}

function base32(bytes: Buffer): string {
  let out = '';
  let bits = 0;
  let value = 0;
  for (const b of bytes) {
    value = (value << 8) | b;
    bits += 8;
    while (bits >= 5) {
      out += B32[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
    value &= (1 << bits) - 1;
  }
  return out;
}
