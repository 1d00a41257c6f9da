import type { LookupAddress } from 'node:dns';
import { lookup } from 'node:dns/promises';
import http, { type IncomingMessage } from 'node:http';
import https from 'node:https';
import { BlockList, isIP } from 'node:net';
import { AppError, isAppError } from '../errors.js';

export type FetchedFile = { content: Buffer; contentType: string | undefined; filename: string | undefined };
export type FetchRemoteOptions = { maxBytes: number; allowPrivate: boolean; timeoutMs?: number };

const MAX_REDIRECTS = 5;
const DEFAULT_TIMEOUT_MS = 30_000;

/**
 * Addresses a caller-supplied URL must not reach (SSRF). PRIVATE (loopback, RFC 1918, CGNAT,
 * unique-local, NAT64) opens up with ATTACHMENT_FETCH_ALLOW_PRIVATE for local testing; NEVER
 * (unspecified, link-local such as cloud metadata at 169.254.169.254, multicast, reserved) never does,
 * since no local test server lives there. IPv4-mapped IPv6 is unwrapped first.
 */
const NEVER = subnets([['0.0.0.0', 8], ['169.254.0.0', 16], ['224.0.0.0', 4], ['240.0.0.0', 4]], [['::', 128], ['fe80::', 10], ['fec0::', 10], ['ff00::', 8]]);
const PRIVATE = subnets(
  [['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['172.16.0.0', 12], ['192.0.0.0', 24], ['192.168.0.0', 16], ['198.18.0.0', 15]],
  // ::/96 covers ::1 and the deprecated IPv4-compatible form; 64:ff9b::/96 is NAT64 onto IPv4.
  [['::', 96], ['64:ff9b::', 96], ['fc00::', 7]],
);

function subnets(v4: [string, number][], v6: [string, number][]): BlockList {
  const list = new BlockList();
  for (const [net, prefix] of v4) list.addSubnet(net, prefix, 'ipv4');
  for (const [net, prefix] of v6) list.addSubnet(net, prefix, 'ipv6');
  return list;
}

/** True when attachment fetches refuse `literal` (an IP address); `allowPrivate` lifts only the PRIVATE ranges. Pure. */
export function isBlockedAddress(literal: string, allowPrivate = false): boolean {
  const address = literal.split('%')[0]!; // an IPv6 zone id (fe80::1%eth0) is not part of the address
  const family = isIP(address);
  if (family !== 4 && family !== 6) return true;
  const mapped = family === 6 ? mappedIpv4(address) : undefined;
  const [ip, type] = mapped !== undefined ? [mapped, 'ipv4' as const] : [address, family === 4 ? 'ipv4' as const : 'ipv6' as const];
  return NEVER.check(ip, type) || (!allowPrivate && PRIVATE.check(ip, type));
}

/** `::ffff:a.b.c.d` in any spelling → `a.b.c.d` (the URL parser canonicalizes IPv6 to `::ffff:xxxx:xxxx`). */
function mappedIpv4(address: string): string | undefined {
  let canonical: string;
  try {
    canonical = new URL(`http://[${address}]/`).hostname;
  } catch {
    return undefined;
  }
  const hex = /^\[::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})\]$/.exec(canonical);
  if (!hex) return undefined;
  const [hi, lo] = [parseInt(hex[1]!, 16), parseInt(hex[2]!, 16)];
  return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
}

const fetchFailed = (message: string, retryable = false) => new AppError(400, 'attachment_fetch_failed', message, retryable);
export const attachmentTooLarge = (maxBytes: number) =>
  new AppError(413, 'attachment_too_large', `Attachment is larger than the ${Math.floor(maxBytes / (1024 * 1024))} MB limit`);

/**
 * GETs an http(s) URL for an attachment: every hop's host is resolved once, checked against the
 * internal ranges (private ones allowed with `allowPrivate`) and connected to by that very address, so a DNS answer
 * cannot change between check and connect. At most 5 redirects; bodies past `maxBytes` abort with 413.
 */
export async function fetchRemote(url: string, opts: FetchRemoteOptions): Promise<FetchedFile> {
  const timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const signal = AbortSignal.timeout(timeoutMs);
  let current = parseHttpUrl(url);
  try {
    for (let hop = 0; ; hop++) {
      const address = await resolveAllowed(current, opts.allowPrivate);
      const res = await get(current, address, signal);
      const status = res.statusCode ?? 0;
      if (status >= 300 && status < 400 && res.headers.location) {
        res.destroy();
        if (hop >= MAX_REDIRECTS) throw fetchFailed(`Attachment URL redirected more than ${MAX_REDIRECTS} times`);
        current = parseHttpUrl(new URL(res.headers.location, current).href);
        continue;
      }
      if (status < 200 || status >= 300) {
        res.destroy();
        throw fetchFailed(`Attachment URL answered HTTP ${status} (${current.host})`, status >= 500 || status === 429);
      }
      const content = await readCapped(res, opts.maxBytes);
      return { content, contentType: contentTypeOf(res.headers['content-type']), filename: filenameOf(res.headers['content-disposition'], current) };
    }
  } catch (err) {
    if (isAppError(err)) throw err;
    if (signal.aborted) throw fetchFailed(`Attachment URL did not answer within ${Math.round(timeoutMs / 1000)} s (${current.host})`, true);
    throw fetchFailed(`Could not fetch the attachment URL (${current.host}): ${(err as Error).message}`, true);
  }
}

/** Parses and checks the scheme; only http and https are fetched. */
export function parseHttpUrl(raw: string): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw fetchFailed('Attachment url is not a valid absolute URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw fetchFailed(`Attachment url must be http or https, not ${url.protocol.replace(/:$/, '')}`);
  if (url.username || url.password) throw fetchFailed('Attachment url must not carry credentials');
  return url;
}

/** One DNS lookup per hop (all addresses); refuses the host if any answer is internal. */
async function resolveAllowed(url: URL, allowPrivate: boolean): Promise<LookupAddress> {
  const host = url.hostname.replace(/^\[|\]$/g, '');
  let addresses: LookupAddress[];
  try {
    addresses = await lookup(host, { all: true, verbatim: true });
  } catch (err) {
    throw fetchFailed(`Could not resolve the attachment URL's host ${host} (${(err as NodeJS.ErrnoException).code ?? 'error'})`, true);
  }
  if (addresses.length === 0) throw fetchFailed(`The attachment URL's host ${host} has no address`, true);
  if (addresses.some((a) => isBlockedAddress(a.address, allowPrivate))) {
    throw new AppError(400, 'attachment_url_blocked',
      `Attachment URL host ${host} resolves to an internal address (loopback, private, link-local or reserved); only public addresses are fetched`);
  }
  return addresses[0]!;
}

/** Connects to the checked address itself; Host header and TLS name still come from the URL. */
function get(url: URL, address: LookupAddress, signal: AbortSignal): Promise<IncomingMessage> {
  const host = url.hostname.replace(/^\[|\]$/g, '');
  const client = url.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    const req = client.request({
      method: 'GET', hostname: address.address, family: address.family, port: url.port || undefined, path: `${url.pathname}${url.search}`,
      headers: { host: url.host, accept: '*/*', 'accept-encoding': 'identity', 'user-agent': 'svc-mail-attachments/1' },
      // An IP literal must not be sent as SNI; '' keeps Node from deriving one from the Host header.
      servername: isIP(host) ? '' : host,
      agent: false, signal,
    }, resolve);
    req.on('error', reject);
    req.end();
  });
}

async function readCapped(res: IncomingMessage, maxBytes: number): Promise<Buffer> {
  const declared = Number(res.headers['content-length']);
  if (Number.isFinite(declared) && declared > maxBytes) {
    res.destroy();
    throw attachmentTooLarge(maxBytes);
  }
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of res as AsyncIterable<Buffer>) {
    total += chunk.length;
    // Leaving the loop by throwing destroys the response, so the rest is never read.
    if (total > maxBytes) throw attachmentTooLarge(maxBytes);
    chunks.push(chunk);
  }
  if (!res.complete) throw fetchFailed('The attachment download was cut short', true);
  return Buffer.concat(chunks, total);
}

function contentTypeOf(header: string | undefined): string | undefined {
  const value = header?.trim();
  return value && value.length <= 255 && /^[\w!#$&^.+-]+\/[\w!#$&^.+-]+(\s*;.*)?$/.test(value) ? value : undefined;
}

/** The name from Content-Disposition (RFC 6266, `filename*` first), else the last segment of the URL path. */
export function filenameOf(disposition: string | undefined, url: URL): string | undefined {
  if (disposition) {
    const star = /filename\*\s*=\s*[\w-]*'[^']*'([^;\s]+)/i.exec(disposition);
    const decoded = star && safeDecode(star[1]!);
    if (decoded) return decoded;
    const plain = /filename\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^;\s]+))/i.exec(disposition);
    if (plain) return plain[1] !== undefined ? plain[1].replace(/\\(.)/g, '$1') : plain[2];
  }
  const last = url.pathname.split('/').pop();
  return last ? safeDecode(last) ?? last : undefined;
}

function safeDecode(s: string): string | undefined {
  try {
    return decodeURIComponent(s);
  } catch {
    return undefined;
  }
}
