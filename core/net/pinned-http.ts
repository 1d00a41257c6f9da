import http, { type IncomingHttpHeaders } from 'node:http';
import https from 'node:https';
import { isIP } from 'node:net';
import type { CheckedAddress } from './address-guard.js';

export type PinnedResponse = { status: number; headers: IncomingHttpHeaders; text: string };

/**
 * Connections are kept open between requests (issue: per-message cost): a webhook endpoint takes one
 * POST after another, and a new TCP (and TLS) connection for each cost more than the POST. Sockets are
 * keyed by the checked address, port and TLS server name, so a reused socket goes where a new one would.
 * An idle socket closes after 4 s, before the 5 s keep-alive timeout of common servers.
 */
const IDLE_MS = 4_000;
const agents = {
  http: new http.Agent({ keepAlive: true, maxSockets: 64, maxFreeSockets: 16, timeout: IDLE_MS }),
  https: new https.Agent({ keepAlive: true, maxSockets: 64, maxFreeSockets: 16, timeout: IDLE_MS }),
};

/**
 * One HTTP(S) request to an address checked beforehand: the socket goes to `address`, while the Host
 * header and the TLS server name (SNI, certificate check) still come from the URL. Redirects are not
 * followed; the response body is read up to `maxResponseBytes` and the rest dropped. A request on a kept
 * socket that the server had closed meanwhile (ECONNRESET before any answer) is sent again on a new one.
 */
export async function requestPinned(
  url: URL,
  address: CheckedAddress,
  opts: {
    method: string;
    headers: Record<string, string>;
    body?: string | Buffer;
    timeoutMs: number;
    maxResponseBytes: number;
  },
): Promise<PinnedResponse> {
  try {
    return await requestOnce(url, address, opts, false);
  } catch (err) {
    if (!(err instanceof StaleSocketError)) throw err;
    // Once more on a fresh socket: a failure there is the answer.
    return requestOnce(url, address, opts, true);
  }
}

class StaleSocketError extends Error {}

function requestOnce(
  url: URL,
  address: CheckedAddress,
  opts: {
    method: string;
    headers: Record<string, string>;
    body?: string | Buffer;
    timeoutMs: number;
    maxResponseBytes: number;
  },
  fresh: boolean,
): Promise<PinnedResponse> {
  const host = url.hostname.replace(/^\[|\]$/g, '');
  const client = url.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    const req = client.request(
      {
        method: opts.method,
        host: address.address,
        family: address.family,
        port: url.port || undefined,
        path: `${url.pathname}${url.search}`,
        headers: {
          host: url.host,
          ...opts.headers,
          ...(opts.body !== undefined ? { 'content-length': String(Buffer.byteLength(opts.body)) } : {}),
        },
        // An IP literal must not be sent as SNI; '' keeps Node from deriving one from the address.
        servername: isIP(host) ? '' : host,
        agent: fresh ? false : agents[url.protocol === 'https:' ? 'https' : 'http'],
        signal: AbortSignal.timeout(opts.timeoutMs),
      },
      (res) => {
        const chunks: Buffer[] = [];
        let kept = 0;
        res.on('data', (chunk: Buffer) => {
          if (kept >= opts.maxResponseBytes) return;
          chunks.push(chunk);
          kept += chunk.length;
        });
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            text: Buffer.concat(chunks).subarray(0, opts.maxResponseBytes).toString('utf8'),
          }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', (err: NodeJS.ErrnoException) => {
      // The server closed a kept socket just as this request went out: nothing reached it, so it goes again.
      if (req.reusedSocket && err.code === 'ECONNRESET')
        reject(new StaleSocketError('stale keep-alive socket', { cause: err }));
      else reject(err);
    });
    req.end(opts.body);
  });
}
