/**
 * The `_mta-sts.<domain>` TXT record (RFC 8461 §3.1): `v=STSv1; id=<1-32 alphanumerics>;` plus extension
 * fields. Exactly one record starting `v=STSv1` names a policy; none, several, or one that does not parse
 * means the domain has no policy. Parsed by splitting, never by a regex over outside input, and bounded.
 */

/** Longer records are refused unread (a real one is a few dozen characters). */
export const MAX_RECORD_CHARS = 1024;

export type StsRecord = { id: string } | { none: string };

const ALNUM = (c: number) => (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122);
const isAlnum = (s: string) => [...s].every((ch) => ALNUM(ch.charCodeAt(0)));

/** The record among a TXT answer (each record a list of strings, joined as RFC 7208 §3.3 does). */
export function parseStsRecords(answer: string[][]): StsRecord {
  const records = answer.map((chunks) => chunks.join('')).filter((r) => r.startsWith('v=STSv1'));
  if (records.length === 0) return { none: 'no v=STSv1 record' };
  if (records.length > 1) return { none: `${records.length} v=STSv1 records (exactly one is allowed)` };
  return parseStsRecord(records[0]!);
}

/** One record: `v=STSv1` first, then `id=` once; other well-formed fields are extensions and ignored. */
export function parseStsRecord(record: string): StsRecord {
  if (record.length > MAX_RECORD_CHARS) return { none: `record longer than ${MAX_RECORD_CHARS} characters` };
  const fields = record
    .split(';')
    .map((f) => f.trim())
    .filter((f) => f !== '');
  if (fields[0] !== 'v=STSv1') return { none: 'record does not start with v=STSv1' };
  let id: string | undefined;
  for (const field of fields.slice(1)) {
    const eq = field.indexOf('=');
    if (eq <= 0) return { none: `malformed field "${field.slice(0, 40)}"` };
    const [name, value] = [field.slice(0, eq).trim(), field.slice(eq + 1).trim()];
    if (name !== 'id') continue;
    if (id !== undefined) return { none: 'more than one id= field' };
    if (value.length < 1 || value.length > 32 || !isAlnum(value))
      return { none: 'id= must be 1 to 32 letters and digits' };
    id = value;
  }
  return id === undefined ? { none: 'record has no id= field' } : { id };
}

/**
 * A domain name as the policy is keyed: lowercased, no trailing dot, letters, digits, hyphens and dots,
 * at most 253 characters; null for anything else (the lookup answers "no policy", the operator route 400).
 */
export function normalizeDomain(raw: string): string | null {
  const d = raw.toLowerCase().endsWith('.') ? raw.toLowerCase().slice(0, -1) : raw.toLowerCase();
  if (d.length === 0 || d.length > 253 || !d.includes('.')) return null;
  for (const label of d.split('.')) {
    if (label.length === 0 || label.length > 63) return null;
    if (![...label].every((ch) => ch === '-' || ALNUM(ch.charCodeAt(0)))) return null;
  }
  return d;
}
