import { createPrivateKey, X509Certificate } from 'node:crypto';
import type { Resolver } from 'node:dns/promises';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import type { Config } from '../config.js';
import { check, within, type CheckResult } from './checks.js';

const DAY_MS = 86_400_000;
const CONNECT_LIMIT_MS = 6_000;

/**
 * Outbound port 25: connects to the MX of a well-known domain and waits for its 220 greeting. When that
 * MX cannot even be resolved (no internet), the check says "skipped" instead of failing or hanging.
 */
export async function checkPort25(resolver: Resolver, config: Config, probeDomain: string): Promise<CheckResult> {
  const c = check(
    'smtp.port25',
    `outbound port ${config.mxPort} to a known MX (${probeDomain})`,
    config.outboundMode === 'mx',
  );
  if (config.outboundMode !== 'mx')
    return c.skipped(`OUTBOUND_MODE=${config.outboundMode}: mail does not go to MX hosts directly`);
  let host: string;
  let address: string;
  try {
    const mx = (await within(8_000, `MX ${probeDomain}`, () => resolver.resolveMx(probeDomain))).sort(
      (a, b) => a.priority - b.priority,
    );
    host = mx[0]!.exchange;
    address = (await within(8_000, `A ${host}`, () => resolver.resolve4(host)))[0]!;
  } catch (err) {
    return c.skipped(
      `offline? could not resolve the MX of ${probeDomain} through DNS_SERVERS (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}), so port ${config.mxPort} was not tried`,
    );
  }
  try {
    const greeting = await within(CONNECT_LIMIT_MS, `${host}:${config.mxPort}`, () => greet(address, config.mxPort));
    return greeting.startsWith('220')
      ? c.ok(`${host} (${address}) answered "${greeting.slice(0, 60)}"`)
      : c.fail(`${host} answered "${greeting.slice(0, 60)}"`, 'check the firewall in front of this host');
  } catch (err) {
    return c.fail(
      `could not reach ${host} (${address}) on port ${config.mxPort}: ${(err as Error).message}`,
      'ask your hosting provider to open outbound port 25, or send through a relay (OUTBOUND_MODE=relay with SMTP_RELAY_URL)',
    );
  }
}

/** Opens a TCP connection and answers the first line the server sends. */
function greet(host: string, port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host, port });
    socket.setTimeout(CONNECT_LIMIT_MS, () => socket.destroy(new Error('timed out')));
    socket.once('data', (data) => {
      resolve(data.toString('latin1').split(/\r?\n/)[0]!);
      socket.end('QUIT\r\n');
      socket.destroy();
    });
    socket.once('error', reject);
    socket.once('close', () => reject(new Error('closed before the greeting')));
  });
}

/**
 * SMTP_TLS_CERT/SMTP_TLS_KEY read and checked against each other: the certificate, or what is wrong with
 * the files and the fix (shared by the ingress's STARTTLS check and the submission certificate check).
 */
export function readCertificate(
  config: Config,
): { cert: X509Certificate } | { cert?: undefined; detail: string; fix: string } {
  const { tlsCertFile, tlsKeyFile } = config.smtp;
  if (!tlsCertFile || !tlsKeyFile)
    return { detail: 'SMTP_TLS_CERT/SMTP_TLS_KEY are not set', fix: 'set SMTP_TLS_CERT and SMTP_TLS_KEY' };
  let cert: X509Certificate;
  try {
    cert = new X509Certificate(readFileSync(tlsCertFile));
  } catch (err) {
    return {
      detail: `cannot read ${tlsCertFile}: ${(err as Error).message}`,
      fix: 'point SMTP_TLS_CERT at a PEM certificate file',
    };
  }
  try {
    if (!cert.checkPrivateKey(createPrivateKey(readFileSync(tlsKeyFile))))
      return {
        detail: `SMTP_TLS_KEY does not belong to the certificate`,
        fix: 'point SMTP_TLS_KEY at the key of this certificate',
      };
  } catch (err) {
    return {
      detail: `cannot read the key ${tlsKeyFile}: ${(err as Error).message}`,
      fix: 'point SMTP_TLS_KEY at a PEM private key',
    };
  }
  return { cert };
}

/**
 * A readable certificate's dates and name: a failure (not yet valid, expired, another host), a warning
 * within 14 days of expiry, else undefined. `role` names what to restart after renewing.
 */
export function certificateDates(
  cert: X509Certificate,
  host: string,
  role: string,
  now: number,
): { status: 'fail' | 'warn'; detail: string; fix: string } | undefined {
  const renew = `renew the certificate for ${host} and restart the ${role} role`;
  const [from, to] = [Date.parse(cert.validFrom), Date.parse(cert.validTo)];
  if (now < from)
    return {
      status: 'fail',
      detail: `not valid before ${cert.validFrom}`,
      fix: 'check the clock of this host, or the certificate',
    };
  if (now > to) return { status: 'fail', detail: `expired ${cert.validTo}`, fix: renew };
  if (!cert.checkHost(host))
    return {
      status: 'fail',
      detail: `the certificate is for ${cert.subjectAltName ?? cert.subject}, not ${host}`,
      fix: `use a certificate whose subjectAltName includes DNS:${host}`,
    };
  if (to - now < 14 * DAY_MS)
    return {
      status: 'warn',
      detail: `expires ${cert.validTo} (in ${Math.floor((to - now) / DAY_MS)} days)`,
      fix: renew,
    };
  return undefined;
}

/** The STARTTLS certificate: present, readable, valid now and for two more weeks, and naming SERVICE_DOMAIN. */
export function checkTlsCertificate(config: Config, now = Date.now()): CheckResult {
  const host = config.serviceDomain;
  const c = check('smtp.tls', `STARTTLS certificate (SMTP_TLS_CERT) for ${host}`);
  if (!config.smtp.tlsCertFile || !config.smtp.tlsKeyFile)
    return c.fail(
      'SMTP_TLS_CERT/SMTP_TLS_KEY are not set: inbound SMTP offers no STARTTLS',
      `set SMTP_TLS_CERT and SMTP_TLS_KEY to PEM files of a certificate for ${host} (e.g. from Let's Encrypt)`,
    );
  const read = readCertificate(config);
  if (!read.cert) return c.fail(read.detail, read.fix);
  const { cert } = read;
  const dated = certificateDates(cert, host, 'smtp', now);
  if (dated) return dated.status === 'fail' ? c.fail(dated.detail, dated.fix) : c.warn(dated.detail, dated.fix);
  return c.ok(`valid until ${cert.validTo}, matches ${host}`);
}

/** Where SECRET_KEY comes from; a generated file is fine as long as it is backed up (sealed keys die with it). */
export function checkSecretKey(config: Config): CheckResult {
  const c = check('secret.key', 'SECRET_KEY origin');
  if (config.secretKeySource === 'env')
    return c.ok(
      'set in the environment; keep a copy in your secrets store: without it sealed DKIM keys, API keys and webhook secrets are lost',
    );
  return c.warn(
    `generated on first boot and kept in ${config.dataDir}/secret.key`,
    `back that file up, or move its value into SECRET_KEY (every role of a split deployment needs the same one)`,
  );
}

/** Whether mail actually leaves: `capture` keeps it in a local outbox. */
export function checkOutboundMode(config: Config): CheckResult {
  const c = check('outbound.mode', 'OUTBOUND_MODE');
  if (config.outboundMode === 'mx') return c.ok(`mx: direct delivery to recipients' MX on port ${config.mxPort}`);
  if (config.outboundMode === 'relay') return c.ok(`relay: everything goes through ${new URL(config.relayUrl!).host}`);
  return c.fail(
    'capture: outbound mail is kept in a local outbox and never delivered',
    'set OUTBOUND_MODE=mx (direct delivery, needs outbound port 25) or OUTBOUND_MODE=relay with SMTP_RELAY_URL',
  );
}
