import { createHash, randomBytes, randomFillSync } from 'node:crypto';

/** Id prefixes of SPEC.md, plus the service's internal ones (evt_, tok_, mbx_ mailbox, OAuth's oac_ client, grt_ grant, ocd_ code, ort_ refresh token, shaping's lease_ and shp_ action). */
export type IdPrefix =
  | 'dom'
  | 'rte'
  | 'msg'
  | 'dlv'
  | 'usr'
  | 'key'
  | 'apw'
  | 'bct'
  | 'lst'
  | 'tpl'
  | 'base'
  | 'ssnd'
  | 'ctc'
  | 'cev'
  | 'att'
  | 'evt'
  | 'tok'
  | 'obx'
  | 'dns'
  | 'reg'
  | 'sup'
  | 'mbx'
  | 'imp'
  | 'oac'
  | 'grt'
  | 'ocd'
  | 'ort'
  | 'seq'
  | 'enr'
  | 'sqo'
  | 'lease'
  | 'shp'
  | 'mbb'
  | 'sbr';

/** `<prefix>_` + 24 random URL-safe characters (DESIGN.md: at least 20). */
export function newId(prefix: IdPrefix): string {
  return `${prefix}_${randomToken(18)}`;
}

/** URL-safe random string from `bytes` random bytes (4 characters per 3 bytes). */
export function randomToken(bytes: number): string {
  return randomSlice(bytes).toString('base64url');
}

/**
 * Fresh bytes from the CSPRNG, taken from a pool filled 4 KB at a time (as Node's own randomUUID does): an id
 * costs a slice, not a system call. Each byte is handed out once; large requests bypass the pool.
 */
const POOL_BYTES = 4096;
let pool = Buffer.alloc(0);
let offset = 0;
function randomSlice(n: number): Buffer {
  if (n > 256) return randomBytes(n);
  if (offset + n > pool.length) {
    pool = randomFillSync(Buffer.allocUnsafe(POOL_BYTES));
    offset = 0;
  }
  const out = pool.subarray(offset, offset + n);
  offset += n;
  return out;
}

/** An id derived from what it names (`<prefix>_` + 24 characters of a SHA-256), so doing the same thing twice makes one row. */
export function derivedId(prefix: IdPrefix, ...parts: string[]): string {
  const h = createHash('sha256');
  for (const p of parts) h.update(p).update('\0');
  return `${prefix}_${h.digest('base64url').slice(0, 24)}`;
}
