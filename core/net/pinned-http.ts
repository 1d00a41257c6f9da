import http, { type IncomingHttpHeaders } from 'node:http';
import https from 'node:https';
import { isIP } from 'node:net';
import type { CheckedAddress } from './address-guard.js';

export type PinnedResponse = { status: number; headers: IncomingHttpHeaders; text: string };

/**
 * One HTTP(S) request to an address checked beforehand: the socket goes to `address`, while the Host
 * header and the TLS server name (SNI, certificate check) still come from the URL. Redirects are not
 * followed; the response body is read up to `maxResponseBytes` and the rest dropped.
 */
export function requestPinned(url: URL, address: CheckedAddress, opts: {
  method: string; headers: Record<string, string>; body?: string; timeoutMs: number; maxResponseBytes: number;
}): Promise<PinnedResponse> {
  const host = url.hostname.replace(/^\[|\]$/g, '');
  const client = url.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    const req = client.request({
      method: opts.method, host: address.address, family: address.family, port: url.port || undefined, path: `${url.pathname}${url.search}`,
      headers: { host: url.host, ...opts.headers, ...(opts.body !== undefined ? { 'content-length': String(Buffer.byteLength(opts.body)) } : {}) },
      // An IP literal must not be sent as SNI; '' keeps Node from deriving one from the address.
      servername: isIP(host) ? '' : host,
      agent: false, signal: AbortSignal.timeout(opts.timeoutMs),
    }, (res) => {
      const chunks: Buffer[] = [];
      let kept = 0;
      res.on('data', (chunk: Buffer) => {
        if (kept >= opts.maxResponseBytes) return;
        chunks.push(chunk);
        kept += chunk.length;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).subarray(0, opts.maxResponseBytes).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(opts.body);
  });
}
