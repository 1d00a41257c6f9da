import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { SMTPServer } from 'smtp-server';

/** What a recording MX saw of one session: the peer's address, the EHLO name, whether it was encrypted. */
export type SeenSession = { peer: string; ehlo: string; secure: boolean; mailFrom: number; user?: string };

/**
 * A loopback MX for egress and TLS tests, bound to `host`: it records each session (peer address, EHLO
 * name, TLS, MAIL FROM commands) and each recipient's copies; with `tls` it offers STARTTLS with that
 * certificate, without it none; `refuse(peer)` answers `421 4.7.28` at the greeting to that peer.
 */
export async function startRecordingMx(opts: {
  host: string;
  port: number;
  tls?: { key: Buffer; cert: Buffer };
  refuse?: (peer: string) => boolean;
  /** A relay: AUTH required (over TLS) with these credentials. */
  auth?: { user: string; pass: string };
}) {
  const sessions: SeenSession[] = [];
  const byId = new Map<string, SeenSession>();
  const copies = new Map<string, { count: number; peer: string; ehlo: string }>();
  const server = new SMTPServer({
    authOptional: !opts.auth,
    disabledCommands: [...(opts.auth ? [] : ['AUTH']), ...(opts.tls ? [] : ['STARTTLS'])],
    onAuth(auth, session, cb) {
      if (auth.username !== opts.auth?.user || auth.password !== opts.auth?.pass)
        return cb(Object.assign(new Error('5.7.8 Authentication failed'), { responseCode: 535 }));
      const seen = byId.get(session.id);
      if (seen) seen.user = auth.username;
      cb(null, { user: auth.username });
    },
    ...opts.tls,
    logger: false,
    onConnect(session, cb) {
      const seen = { peer: session.remoteAddress, ehlo: '', secure: false, mailFrom: 0 };
      sessions.push(seen);
      byId.set(session.id, seen);
      if (opts.refuse?.(session.remoteAddress))
        return cb(
          Object.assign(
            new Error('4.7.28 Our system has detected an unusual rate of mail from your IP. Rate limited.'),
            {
              responseCode: 421,
            },
          ),
        );
      cb();
    },
    onMailFrom(_address, session, cb) {
      const seen = byId.get(session.id);
      if (seen) {
        seen.mailFrom += 1;
        seen.ehlo = session.hostNameAppearsAs;
        seen.secure = session.secure;
      }
      cb();
    },
    onData(stream, session, cb) {
      stream.on('data', () => undefined);
      stream.on('end', () => {
        for (const r of session.envelope.rcptTo) {
          const a = r.address.toLowerCase();
          const hit = copies.get(a);
          copies.set(a, {
            count: (hit?.count ?? 0) + 1,
            peer: session.remoteAddress,
            ehlo: session.hostNameAppearsAs,
          });
        }
        cb();
      });
    },
  });
  server.on('error', () => undefined);
  await new Promise<void>((resolve, reject) => {
    server.server.once('error', reject);
    server.listen(opts.port, opts.host, () => resolve());
  });
  return {
    sessions,
    copies,
    /** MAIL FROM commands received, over all sessions. */
    mailFroms: () => sessions.reduce((n, s) => n + s.mailFrom, 0),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
export type RecordingMx = Awaited<ReturnType<typeof startRecordingMx>>;

/** A self-signed certificate for `names` (the first is the CN), valid for 30 days. */
export async function selfSignedFor(dir: string, file: string, names: string[]) {
  const [key, cert] = [join(dir, `${file}.key`), join(dir, `${file}.crt`)];
  const args = ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  const san = names.map((n) => `DNS:${n}`).join(',');
  await promisify(execFile)('openssl', [
    ...args,
    ...['-keyout', key, '-out', cert, '-days', '30', '-subj', `/CN=${names[0]}`, '-addext', `subjectAltName=${san}`],
  ]);
  return { key: readFileSync(key), cert: readFileSync(cert) };
}
