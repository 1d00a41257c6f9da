import type { LookupAddress } from 'node:dns';
import { lookup } from 'node:dns/promises';
import http, { type IncomingMessage } from 'node:http';
import https from 'node:https';
import { isIP } from 'node:net';
import { AppError, isAppError } from '../errors.js';
import { isBlockedAddress } from '../net/address-guard.js';

export type FetchedFile = { content: Buffer; contentType: string | undefined; filename: string | undefined };
export type FetchRemoteOptions = { maxBytes: number; allowPrivate: boolean; timeoutMs?: number };

const MAX_REDIRECTS = 5;
const DEFAULT_TIMEOUT_MS = 30_000;

const fetchFailed = (message: string, retryable = false) =>
  new AppError(400, 'attachment_fetch_failed', message, retryable);
export const attachmentTooLarge = (maxBytes: number) =>
  new AppError(
    413,
    'attachment_too_large',
    `Attachment is larger than the ${Math.floor(maxBytes / (1024 * 1024))} MB limit`,
  );

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
      return {
        content,
        contentType: contentTypeOf(res.headers['content-type']),
        filename: filenameOf(res.headers['content-disposition'], current),
      };
    }
  } catch (err) {
    if (isAppError(err)) throw err;
    if (signal.aborted)
      throw fetchFailed(
        `Attachment URL did not answer within ${Math.round(timeoutMs / 1000)} s (${current.host})`,
        true,
      );
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
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw fetchFailed(`Attachment url must be http or https, not ${url.protocol.replace(/:$/, '')}`);
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
    throw fetchFailed(
      `Could not resolve the attachment URL's host ${host} (${(err as NodeJS.ErrnoException).code ?? 'error'})`,
      true,
    );
  }
  if (addresses.length === 0) throw fetchFailed(`The attachment URL's host ${host} has no address`, true);
  if (addresses.some((a) => isBlockedAddress(a.address, allowPrivate))) {
    throw new AppError(
      400,
      'attachment_url_blocked',
      `Attachment URL host ${host} resolves to an internal address (loopback, private, link-local or reserved); only public addresses are fetched`,
    );
  }
  return addresses[0]!;
}

/** Connects to the checked address itself; Host header and TLS name still come from the URL. */
function get(url: URL, address: LookupAddress, signal: AbortSignal): Promise<IncomingMessage> {
  const host = url.hostname.replace(/^\[|\]$/g, '');
  const client = url.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    const req = client.request(
      {
        method: 'GET',
        hostname: address.address,
        family: address.family,
        port: url.port || undefined,
        path: `${url.pathname}${url.search}`,
        headers: {
          host: url.host,
          accept: '*/*',
          'accept-encoding': 'identity',
          'user-agent': 'svc-mail-attachments/1',
        },
        // An IP literal must not be sent as SNI; '' keeps Node from deriving one from the Host header.
        servername: isIP(host) ? '' : host,
        agent: false,
        signal,
      },
      resolve,
    );
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
  return last ? (safeDecode(last) ?? last) : undefined;
}

function safeDecode(s: string): string | undefined {
  try {
    return decodeURIComponent(s);
  } catch {
    return undefined;
  }
}
