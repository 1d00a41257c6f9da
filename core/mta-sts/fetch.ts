import type { Resolver } from 'node:dns/promises';
import https from 'node:https';
import { resolveAllowed } from '../net/address-guard.js';

/** Why a policy could not be read: recorded on the policy row (`status: failed`), never thrown further. */
export class PolicyFetchError extends Error {
  override name = 'PolicyFetchError';
}

export type PolicyFetchOptions = {
  resolver: Resolver;
  allowPrivate: boolean;
  /** The HTTPS port (443; tests serve on another). */
  port: number;
  maxBytes: number;
  timeoutMs: number;
  /** Unit tests only: the CA to trust instead of Node's default roots (which include NODE_EXTRA_CA_CERTS). */
  ca?: string | Buffer;
};

/** `https://mta-sts.<domain>[:port]/.well-known/mta-sts.txt` (RFC 8461 §3.3). */
export const policyUrl = (domain: string, port: number) =>
  `https://mta-sts.${domain}${port === 443 ? '' : `:${port}`}/.well-known/mta-sts.txt`;

/**
 * Fetches the policy text of `domain` (RFC 8461 §3.3): `mta-sts.<domain>` resolved once and checked as
 * webhook destinations are (core/net/address-guard.ts), the connection pinned to that address with the
 * host name as TLS server name, the certificate verified, no redirect followed, 200 with text/plain only.
 * The body is refused (the connection cut) as soon as it passes `maxBytes`; the whole fetch, DNS included,
 * ends at `timeoutMs`. Throws PolicyFetchError with the reason.
 */
export async function fetchPolicyText(domain: string, opts: PolicyFetchOptions): Promise<string> {
  const host = `mta-sts.${domain}`;
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), opts.timeoutMs);
  const expired = new Promise<never>((_, reject) =>
    controller.signal.addEventListener('abort', () =>
      reject(new PolicyFetchError(`no policy from ${host} within ${opts.timeoutMs} ms`)),
    ),
  );
  expired.catch(() => undefined);
  try {
    const address = await Promise.race([
      resolveAllowed(host, { resolver: opts.resolver, allowPrivate: opts.allowPrivate, what: 'MTA-STS host' }).catch(
        (err: Error) => {
          throw new PolicyFetchError(err.message);
        },
      ),
      expired,
    ]);
    return await Promise.race([get(host, address, opts, controller.signal), expired]);
  } finally {
    clearTimeout(timer);
  }
}

function get(
  host: string,
  address: { address: string; family: 4 | 6 },
  opts: PolicyFetchOptions,
  signal: AbortSignal,
): Promise<string> {
  return new Promise((resolve, reject) => {
    const fail = (reason: string) => {
      req.destroy();
      reject(new PolicyFetchError(reason));
    };
    const req = https.request(
      {
        method: 'GET',
        host: address.address,
        family: address.family,
        port: opts.port,
        path: '/.well-known/mta-sts.txt',
        headers: { host: opts.port === 443 ? host : `${host}:${opts.port}`, accept: 'text/plain' },
        servername: host,
        rejectUnauthorized: true,
        ...(opts.ca ? { ca: opts.ca } : {}),
        agent: false,
        signal,
      },
      (res) => {
        const status = res.statusCode ?? 0;
        if (status >= 300 && status < 400) return fail(`HTTP ${status}: redirects are not followed (RFC 8461 §3.3)`);
        if (status !== 200) return fail(`HTTP ${status} (200 expected)`);
        const type = (res.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
        if (type !== 'text/plain') return fail(`Content-Type "${type.slice(0, 60)}" (text/plain expected)`);
        const declared = Number(res.headers['content-length'] ?? 0);
        if (declared > opts.maxBytes)
          return fail(`policy of ${declared} bytes is over the ${opts.maxBytes}-byte bound`);
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > opts.maxBytes) return fail(`policy over the ${opts.maxBytes}-byte bound`);
          chunks.push(chunk);
        });
        res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
        res.on('error', (err) => reject(new PolicyFetchError(err.message)));
      },
    );
    req.on('error', (err: NodeJS.ErrnoException) => {
      if (signal.aborted) return; // the deadline answers
      const cert = err.code?.startsWith('ERR_TLS_') || err.code?.includes('CERT') || err.code?.includes('SIGNATURE');
      reject(new PolicyFetchError(`${cert ? 'certificate refused: ' : ''}${err.message}`));
    });
    req.end();
  });
}
