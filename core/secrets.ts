import {
  createCipheriv,
  createDecipheriv,
  createHash,
  createHmac,
  hkdfSync,
  randomBytes,
  scrypt,
  timingSafeEqual,
} from 'node:crypto';
import { promisify } from 'node:util';

const scryptAsync = promisify(scrypt) as (pw: string, salt: Buffer, len: number, opts: object) => Promise<Buffer>;

/** scrypt parameters: N=2^15, r=8 → 32 MiB per hash, memory-hard. */
const SCRYPT = { N: 1 << 15, r: 8, p: 1, maxmem: 64 * 1024 * 1024 };

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const hash = await scryptAsync(password, salt, 32, SCRYPT);
  return `scrypt$${SCRYPT.N}$${SCRYPT.r}$${SCRYPT.p}$${salt.toString('base64')}$${hash.toString('base64')}`;
}

export async function verifyPassword(password: string, stored: string | null): Promise<boolean> {
  // Hash something even without a stored hash, so a missing account costs the same time as a wrong password.
  const [, n, r, p, saltB64, hashB64] = (stored ?? DUMMY_HASH).split('$');
  const expected = Buffer.from(hashB64 ?? '', 'base64');
  const actual = await scryptAsync(password, Buffer.from(saltB64 ?? '', 'base64'), 32, {
    N: Number(n),
    r: Number(r),
    p: Number(p),
    maxmem: SCRYPT.maxmem,
  });
  return stored !== null && expected.length === actual.length && timingSafeEqual(expected, actual);
}
const DUMMY_HASH = `scrypt$${SCRYPT.N}$${SCRYPT.r}$${SCRYPT.p}$${Buffer.alloc(16).toString('base64')}$${Buffer.alloc(32).toString('base64')}`;

/** Lookup hash of a high-entropy credential (keys, app passwords, one-time tokens). */
export function credentialHash(secret: string): string {
  return createHash('sha256').update(secret).digest('hex');
}

export function safeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** Whether an Authorization header is `Bearer <expected>` (the operator credential), compared in constant time. */
export function bearerMatches(authorization: string | undefined, expected: string): boolean {
  const given = /^Bearer (.+)$/i.exec(authorization ?? '')?.[1]?.trim() ?? '';
  return safeEqual(given, expected);
}

/** Derives a purpose-bound 32-byte key from the root SECRET_KEY. */
export function deriveKey(root: string, purpose: string): Buffer {
  return Buffer.from(hkdfSync('sha256', root, 'svc-mail', purpose, 32));
}

export function hmacHex(key: Buffer | string, data: string): string {
  return createHmac('sha256', key).update(data).digest('hex');
}

/** A sealer encrypts secrets that must be shown again (account key, scoped keys, webhook secrets). */
export type Sealer = { seal(plain: string): string; open(sealed: string): string };

export function createSealer(root: string): Sealer {
  const key = deriveKey(root, 'seal-v1');
  return {
    seal(plain) {
      const iv = randomBytes(12);
      const c = createCipheriv('aes-256-gcm', key, iv);
      const body = Buffer.concat([c.update(plain, 'utf8'), c.final()]);
      return `v1.${Buffer.concat([iv, c.getAuthTag(), body]).toString('base64url')}`;
    },
    open(sealed) {
      const raw = Buffer.from(sealed.slice(3), 'base64url');
      const d = createDecipheriv('aes-256-gcm', key, raw.subarray(0, 12));
      d.setAuthTag(raw.subarray(12, 28));
      return Buffer.concat([d.update(raw.subarray(28)), d.final()]).toString('utf8');
    },
  };
}
