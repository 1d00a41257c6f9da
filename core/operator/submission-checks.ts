import type { X509Certificate } from 'node:crypto';
import type { Resolver } from 'node:dns/promises';
import net from 'node:net';
import tls from 'node:tls';
import type { Config } from '../config.js';
import { check, within, type CheckResult } from './checks.js';
import { certificateDates, readCertificate } from './host-checks.js';

const PROBE_LIMIT_MS = 6_000;
const MAX_REPLY = 16_384;

type Reply = { code: number; lines: string[] };

/** Reads one SMTP reply (all its continuation lines) from a socket, or fails on close, error or an overlong reply. */
function readReply(socket: net.Socket): Promise<Reply> {
  return new Promise((resolve, reject) => {
    let buf = '';
    const finish = (err: Error | undefined, reply?: Reply) => {
      socket.off('data', onData);
      socket.off('error', onError);
      socket.off('close', onClose);
      if (err) reject(err);
      else resolve(reply!);
    };
    const onData = (data: Buffer) => {
      buf += data.toString('latin1');
      if (buf.length > MAX_REPLY) return finish(new Error('an overlong reply'));
      const lines = buf.split('\r\n').slice(0, -1);
      const last = lines.at(-1);
      if (last !== undefined && /^\d{3}(?: |$)/.test(last))
        finish(undefined, { code: Number(last.slice(0, 3)), lines: lines.map((l) => l.slice(4)) });
    };
    const onError = (err: Error) => finish(err);
    const onClose = () => finish(new Error('the connection closed before a reply'));
    socket.on('data', onData);
    socket.once('error', onError);
    socket.once('close', onClose);
  });
}

async function command(socket: net.Socket, line: string): Promise<Reply> {
  const reply = readReply(socket);
  socket.write(`${line}\r\n`);
  return reply;
}

/** The SASL mechanisms an EHLO answer lists (`AUTH PLAIN LOGIN`), or none. */
const authOf = (ehlo: Reply) =>
  ehlo.lines
    .find((l) => l.toUpperCase().startsWith('AUTH '))
    ?.slice(5)
    .trim()
    .split(/\s+/) ?? [];
const offersStartTls = (ehlo: Reply) => ehlo.lines.some((l) => l.trim().toUpperCase() === 'STARTTLS');

function tlsUpgrade(options: tls.ConnectionOptions): Promise<tls.TLSSocket> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ ...options, rejectUnauthorized: false });
    socket.on('error', () => undefined);
    socket.once('secureConnect', () => resolve(socket));
    socket.once('error', reject);
  });
}

function connect(address: string, port: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: address, port });
    // Errors after the connect surface in readReply (as a close); none may go unheard.
    socket.on('error', () => undefined);
    socket.once('connect', () => resolve(socket));
    socket.once('error', reject);
  });
}

/** The address the doctor dials for SUBMISSION_HOST: an IP as written, localhost as 127.0.0.1, else its A record through DNS_SERVERS. */
async function addressOf(resolver: Resolver, host: string): Promise<string> {
  if (net.isIP(host)) return host;
  if (host === 'localhost') return '127.0.0.1';
  const [address] = await within(8_000, `A ${host}`, () => resolver.resolve4(host));
  if (!address) throw new Error(`no A record for ${host}`);
  return address;
}

/** What a TLS session served, compared with SMTP_TLS_CERT: a note when it is another certificate. */
function servedNote(socket: tls.TLSSocket, configured: X509Certificate | undefined): string | undefined {
  const served = socket.getPeerX509Certificate();
  if (!served) return 'no certificate was served';
  if (configured && served.fingerprint256 !== configured.fingerprint256)
    return `it serves ${served.subject.replace(/\n/g, ', ')}, not the certificate of SMTP_TLS_CERT`;
  return undefined;
}

/** A greeting, an EHLO, and the AUTH mechanisms: what every submission session starts with. */
async function greetAndEhlo(socket: net.Socket, greeting: Promise<Reply>): Promise<Reply> {
  const hello = await greeting;
  if (hello.code !== 220) throw new Error(`greeted ${hello.code} ${hello.lines[0] ?? ''}`.trim());
  const ehlo = await command(socket, 'EHLO doctor.invalid');
  if (ehlo.code !== 250) throw new Error(`EHLO answered ${ehlo.code} ${ehlo.lines[0] ?? ''}`.trim());
  return ehlo;
}

/**
 * The submission server as an application meets it, at SUBMISSION_HOST on the ports users are told
 * (SUBMISSION_PUBLIC_PORT / SUBMISSIONS_PUBLIC_PORT, by default the listening ports): on the STARTTLS port
 * a 220 greeting, STARTTLS offered, AUTH refused in clear, then AUTH PLAIN/LOGIN over TLS; on the
 * implicit-TLS port a TLS handshake, a greeting and AUTH. A port of 0 (chosen at start) is skipped.
 */
export async function checkSubmissionPorts(resolver: Resolver, config: Config): Promise<CheckResult[]> {
  const { host, publicPort, publicTlsPort } = config.submission;
  const servername = net.isIP(host) ? undefined : host;
  const configured = readCertificate(config).cert;
  const fix = (port: number) =>
    `start the submission role (npm run start:submission, or the compose service submission) and let ${host}:${port} through the firewall; SUBMISSION_HOST / SUBMISSION_PUBLIC_PORT / SUBMISSIONS_PUBLIC_PORT name what users are told`;

  const starttls = async (): Promise<CheckResult> => {
    const c = check('submission.starttls', `SMTP submission with STARTTLS at ${host}:${publicPort}`);
    if (publicPort === 0) return c.skipped('SUBMISSION_PORT=0: the port is chosen at start, nothing to probe');
    let socket: net.Socket | undefined;
    let secure: tls.TLSSocket | undefined;
    try {
      return await within(PROBE_LIMIT_MS, `${host}:${publicPort}`, async () => {
        const address = await addressOf(resolver, host);
        socket = await connect(address, publicPort);
        const ehlo = await greetAndEhlo(socket, readReply(socket));
        if (!offersStartTls(ehlo)) return c.fail('EHLO does not offer STARTTLS', fix(publicPort));
        // smtp-server lists AUTH before TLS too; what matters is that it refuses it there (538, RFC 4954).
        if (authOf(ehlo).length > 0) {
          const clear = await command(socket, 'AUTH PLAIN');
          if (clear.code === 334) {
            await command(socket, '*');
            return c.fail(
              'AUTH is accepted before TLS',
              'run the submission role of this version (AUTH only after TLS)',
            );
          }
        }
        const go = await command(socket, 'STARTTLS');
        if (go.code !== 220) return c.fail(`STARTTLS answered ${go.code}`, fix(publicPort));
        secure = await tlsUpgrade({ socket, servername });
        const again = await command(secure, 'EHLO doctor.invalid');
        const auth = authOf(again);
        if (!auth.includes('PLAIN') && !auth.includes('LOGIN'))
          return c.fail('no AUTH PLAIN or LOGIN after STARTTLS', 'run the submission role of this version');
        secure.write('QUIT\r\n');
        const note = servedNote(secure, configured);
        if (note)
          return c.warn(note, 'restart the submission role so it reads SMTP_TLS_CERT/SMTP_TLS_KEY (after a renewal)');
        return c.ok(`${address}:${publicPort} greets, offers STARTTLS, then AUTH ${auth.join(' ')}`);
      });
    } catch (err) {
      return c.fail(`no submission server answered: ${(err as Error).message}`, fix(publicPort));
    } finally {
      secure?.destroy();
      socket?.destroy();
    }
  };

  const implicit = async (): Promise<CheckResult> => {
    const c = check('submission.tls', `SMTP submission with implicit TLS at ${host}:${publicTlsPort}`);
    if (publicTlsPort === 0) return c.skipped('SUBMISSIONS_PORT=0: the port is chosen at start, nothing to probe');
    let secure: tls.TLSSocket | undefined;
    try {
      return await within(PROBE_LIMIT_MS, `${host}:${publicTlsPort}`, async () => {
        const address = await addressOf(resolver, host);
        // Listen for the greeting from the start: it may come in the handshake's last flight.
        const socket = tls.connect({ host: address, port: publicTlsPort, servername, rejectUnauthorized: false });
        secure = socket;
        socket.on('error', () => undefined);
        const greeting = readReply(socket);
        greeting.catch(() => undefined);
        await new Promise<void>((resolve, reject) => {
          socket.once('secureConnect', () => resolve());
          socket.once('error', reject);
        });
        const ehlo = await greetAndEhlo(socket, greeting);
        const auth = authOf(ehlo);
        if (!auth.includes('PLAIN') && !auth.includes('LOGIN'))
          return c.fail('no AUTH PLAIN or LOGIN offered', 'run the submission role of this version');
        socket.write('QUIT\r\n');
        const note = servedNote(socket, configured);
        if (note)
          return c.warn(note, 'restart the submission role so it reads SMTP_TLS_CERT/SMTP_TLS_KEY (after a renewal)');
        return c.ok(`${address}:${publicTlsPort} completes a TLS handshake, greets, offers AUTH ${auth.join(' ')}`);
      });
    } catch (err) {
      return c.fail(`no TLS submission server answered: ${(err as Error).message}`, fix(publicTlsPort));
    } finally {
      secure?.destroy();
    }
  };

  return Promise.all([starttls(), implicit()]);
}

/**
 * The certificate applications check when they submit: SMTP_TLS_CERT/SMTP_TLS_KEY readable and matching,
 * valid now and for two more weeks, naming SUBMISSION_HOST, and not self-signed (mail clients and libraries
 * refuse one by default): a failure with NODE_ENV=production, a warning otherwise. Unset, the role serves
 * smtp-server's development certificate: the same.
 */
export function checkSubmissionCertificate(config: Config, now = Date.now()): CheckResult {
  const { host } = config.submission;
  const c = check('submission.cert', `submission certificate (SMTP_TLS_CERT) for ${host}`);
  const production = config.env === 'production';
  const issue = `set SMTP_TLS_CERT and SMTP_TLS_KEY to PEM files of a certificate for ${host} from a public CA (e.g. Let's Encrypt)`;
  if (!config.smtp.tlsCertFile || !config.smtp.tlsKeyFile) {
    const detail =
      "SMTP_TLS_CERT/SMTP_TLS_KEY are not set: submission serves smtp-server's self-signed development certificate, which clients refuse";
    return production ? c.fail(detail, issue) : c.warn(detail, issue);
  }
  const read = readCertificate(config);
  if (!read.cert) return c.fail(read.detail, read.fix);
  const { cert } = read;
  const dated = certificateDates(cert, host, 'submission', now);
  if (dated?.status === 'fail') return c.fail(dated.detail, dated.fix);
  if (cert.checkIssued(cert) && cert.verify(cert.publicKey)) {
    const detail = `self-signed (${cert.subject.replace(/\n/g, ', ')}): applications verifying it refuse to log in`;
    return production ? c.fail(detail, issue) : c.warn(detail, issue);
  }
  if (dated) return c.warn(dated.detail, dated.fix);
  return c.ok(`valid until ${cert.validTo}, matches ${host}, issued by ${cert.issuer.replace(/\n/g, ', ')}`);
}
