import type { MtaStsMode, MtaStsPolicy } from './policy.js';

/**
 * The policy file (RFC 8461 §3.2): `key: value` lines separated by CRLF or LF. `version: STSv1`, `mode:`
 * enforce|testing|none and `max_age:` (0..31557600 seconds) exactly once each, `mx:` once or more (at
 * least once unless the mode is none). Unknown fields with a well-formed name are extensions and ignored;
 * anything else is refused with a reason. Read line by line, never by a regex over the whole text.
 */

export const MAX_AGE_LIMIT = 31_557_600;
const MODES: readonly MtaStsMode[] = ['enforce', 'testing', 'none'];

export type ParsedPolicy = { policy: Omit<MtaStsPolicy, 'id'> } | { error: string };

const isDigits = (s: string) => s.length > 0 && [...s].every((c) => c >= '0' && c <= '9');
const isFieldName = (s: string) => s.length > 0 && s.length <= 32 && [...s].every((c) => /[A-Za-z0-9_.-]/.test(c));

/** An `mx` pattern: a host name, or `*.` and a host name; lowercased, no trailing dot. */
function mxPattern(raw: string): string | null {
  const v = raw.toLowerCase().replace(/\.$/, '');
  const host = v.startsWith('*.') ? v.slice(2) : v;
  if (host.length === 0 || host.length > 253) return null;
  const labels = host.split('.');
  const ok = labels.every((l) => l.length > 0 && l.length <= 63 && [...l].every((c) => /[a-z0-9-]/.test(c)));
  return ok ? v : null;
}

export function parsePolicy(text: string): ParsedPolicy {
  const seen = new Map<string, string>();
  const mx: string[] = [];
  for (const rawLine of text.split('\n')) {
    const line = rawLine.endsWith('\r') ? rawLine.slice(0, -1) : rawLine;
    if (line.trim() === '') continue;
    const colon = line.indexOf(':');
    if (colon <= 0) return { error: `line without "key: value": "${line.slice(0, 40)}"` };
    const key = line.slice(0, colon).trim();
    const value = line.slice(colon + 1).trim();
    if (!isFieldName(key)) return { error: `malformed field name "${key.slice(0, 40)}"` };
    if (key === 'mx') {
      const pattern = mxPattern(value);
      if (pattern === null) return { error: `malformed mx "${value.slice(0, 64)}"` };
      if (mx.length >= 100) return { error: 'more than 100 mx lines' };
      mx.push(pattern);
    } else if (key === 'version' || key === 'mode' || key === 'max_age') {
      if (seen.has(key)) return { error: `${key} given twice` };
      seen.set(key, value);
    }
    // Any other well-formed field is an extension (RFC 8461 §3.2): ignored.
  }
  const version = seen.get('version');
  if (version !== 'STSv1') return { error: version === undefined ? 'no version' : `version "${version}" is not STSv1` };
  const mode = seen.get('mode');
  if (mode === undefined) return { error: 'no mode' };
  if (!(MODES as readonly string[]).includes(mode))
    return { error: `mode "${mode.slice(0, 20)}" is not enforce, testing or none` };
  const maxAge = seen.get('max_age');
  if (maxAge === undefined) return { error: 'no max_age' };
  if (!isDigits(maxAge) || maxAge.length > 10 || Number(maxAge) > MAX_AGE_LIMIT)
    return { error: `max_age "${maxAge.slice(0, 20)}" is not a number of seconds from 0 to ${MAX_AGE_LIMIT}` };
  if (mx.length === 0 && mode !== 'none') return { error: `mode ${mode} names no mx` };
  return { policy: { mode: mode as MtaStsMode, mx, maxAge: Number(maxAge) } };
}
