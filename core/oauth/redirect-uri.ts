import { isIP } from 'node:net';
import { oauthError } from './errors.js';

/** Loopback hosts (RFC 8252 §7.3): `localhost`, 127.0.0.0/8 and [::1] may use plain http. */
export function isLoopbackHost(hostname: string): boolean {
  const host = hostname.toLowerCase().replace(/^\[|\]$/g, '');
  if (host === 'localhost' || host.endsWith('.localhost')) return true;
  if (isIP(host) === 4) return host.startsWith('127.');
  return host === '::1' || host === '0:0:0:0:0:0:0:1';
}

/**
 * A registrable redirect URI: absolute https, or http on a loopback host; never a fragment, and never
 * `javascript:`, `data:` or any other scheme (SPEC.md, POST /oauth/register). Throws `invalid_redirect_uri`.
 */
export function checkRedirectUri(raw: unknown): string {
  const bad = (why: string) => oauthError('invalid_redirect_uri', `redirect_uris: ${why}`);
  if (typeof raw !== 'string' || raw.length === 0) throw bad('every entry must be a non-empty string');
  if (raw.length > 2000) throw bad('an entry is longer than 2000 characters');
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw bad(`"${raw}" is not an absolute URL`);
  }
  if (raw.includes('#')) throw bad(`"${raw}" has a fragment, which redirect URIs must not have`);
  if (url.username || url.password) throw bad(`"${raw}" carries credentials`);
  if (url.protocol === 'https:') {
    if (!url.hostname) throw bad(`"${raw}" has no host`);
    return raw;
  }
  if (url.protocol === 'http:') {
    if (isLoopbackHost(url.hostname)) return raw;
    throw bad(`"${raw}" uses http on a host that is not loopback (localhost, 127.0.0.0/8, [::1]); use https`);
  }
  throw bad(`"${raw}" uses the scheme ${url.protocol} which is not allowed; use https (or http on loopback)`);
}
