import { randomBytes } from 'node:crypto';
import { createServer as createTlsServer } from 'node:tls';
import { SpanKind } from '@opentelemetry/api';
import { SMTPServer, type SMTPServerAddress, type SMTPServerSession } from 'smtp-server';
import getTLSOptions from 'smtp-server/lib/tls-options.js';
import { AppError } from '../core/errors.js';
import type { Core } from '../core/index.js';
import { log, logError } from '../core/log.js';
import type { SubmissionLogin } from '../core/sending/submission.js';
import { inSpan } from '../core/tracing.js';
import { boundedOptions, ownCertificate, type SmtpGuard } from './limits.js';
import { readMessage } from './on-data.js';
import { isFault, smtpError, type SmtpPhase } from './replies.js';

type Callback = (err?: Error | null) => void;
const tooBig = (maxBytes: number) =>
  new AppError(413, 'message_too_large', `Message too big: the limit is ${maxBytes} bytes`);

const tooManyRecipients = (max: number) =>
  new AppError(400, 'too_many_recipients', `Too many recipients: at most ${max} per message`, true);

/** The login onAuth gave the session (smtp-server keeps it as `session.user`). */
const loginOf = (session: SMTPServerSession) => session.user as unknown as SubmissionLogin;

/** A core refusal or fault, answered by smtp/replies.ts; a fault is logged once. */
function answer(callback: Callback, phase: SmtpPhase, what: string) {
  return (err: unknown) => {
    if (isFault(err)) logError(`[submission] ${what} failed`, err);
    callback(smtpError(err, phase));
  };
}

/**
 * The submission server (authenticated SMTP from applications), one listener per mode: STARTTLS on
 * SUBMISSION_PORT, implicit TLS on SUBMISSIONS_PORT, with the ingress's certificate (SMTP_TLS_KEY and
 * SMTP_TLS_CERT, else smtp-server's development certificate). AUTH PLAIN and LOGIN only over TLS
 * (smtp-server answers 538, RFC 4954's "encryption required", in clear); nothing without AUTH (530).
 * The ingress's bounds apply: message size (the rest of an oversized DATA is drained, never kept),
 * recipients per message, clients per listener and per client address (one guard for both listeners:
 * `createSmtpGuard`), commands per minute, idle time.
 */
export function createSubmissionServer(
  core: Pick<Core, 'config' | 'submission'>,
  opts: { secure: boolean; guard: SmtpGuard },
): SMTPServer {
  const { smtp } = core.config;
  const { guard } = opts;
  const server = new SMTPServer({
    name: core.config.serviceDomain,
    banner: 'svc-mail ESMTP submission',
    secure: opts.secure,
    // The implicit-TLS listener is Node's own tls.Server (listenImplicitTls): smtp-server gets sessions already secure.
    secured: opts.secure,
    authMethods: ['PLAIN', 'LOGIN'],
    allowInsecureAuth: false,
    authOptional: false,
    ...boundedOptions(smtp, guard),
    // Both bounds are answered here rather than by smtp-server, whose own replies carry no enhanced status code:
    // an oversized DATA is drained by readMessage and answered 552 5.3.4; a recipient past the limit 452 4.5.3.
    rejectOversized: false,
    onAuth(auth, session, callback) {
      core.submission
        .login(auth.username ?? '', auth.password ?? '', session.remoteAddress)
        .then((login) => callback(null, { user: login }), answer(callback, 'auth', 'AUTH'));
    },
    onMailFrom(address: SMTPServerAddress, session, callback) {
      core.submission
        .sender(loginOf(session), address.address)
        .then(() => callback(), answer(callback, 'mail', 'MAIL'));
    },
    onRcptTo(address: SMTPServerAddress, session, callback) {
      if (session.envelope.rcptTo.length >= smtp.maxRecipients)
        return callback(smtpError(tooManyRecipients(smtp.maxRecipients), 'rcpt'));
      core.submission
        .recipient(loginOf(session), address.address)
        .then(() => callback(), answer(callback, 'rcpt', 'RCPT'));
    },
    onData(stream, session, callback) {
      readMessage(stream, smtp.maxMessageBytes)
        .then(async (raw) => {
          if (!raw || stream.sizeExceeded) return callback(smtpError(tooBig(smtp.maxMessageBytes), 'data'));
          const envelope = {
            from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
            rcpts: session.envelope.rcptTo.map((r) => r.address),
          };
          const sent = await inSpan(
            'smtp submit',
            { 'svc.recipients': envelope.rcpts.length, 'svc.bytes': raw.length },
            () => core.submission.submit(loginOf(session), raw, envelope),
            SpanKind.SERVER,
          );
          log.info({ messageId: sent.id, client: session.remoteAddress }, 'submitted message accepted');
          callback(null, `2.0.0 Ok: ${sent.status} as ${sent.id}`);
        })
        .catch(answer(callback, 'data', 'DATA'));
    },
  });
  guard.attach(server);
  return server;
}

/**
 * The implicit-TLS listener (SUBMISSIONS_PORT): Node's tls.Server does the handshake and hands each secured
 * socket to `server` (made with `secure: true`). smtp-server's own implicit-TLS path wraps a raw socket from
 * below, and a client that closed before its handshake (a TCP probe, a load balancer's check) left the
 * process to crash with SIGSEGV as it stopped. A handshake is bounded by the idle timeout; the listener holds
 * at most SMTP_MAX_CLIENTS sockets; the per-address guard runs as each session starts.
 */
export async function listenImplicitTls(
  server: SMTPServer,
  core: Pick<Core, 'config'>,
  port: number,
  host = '0.0.0.0',
): Promise<{ port: number; close(): Promise<void> }> {
  const { smtp } = core.config;
  const listener = createTlsServer(
    { ...getTLSOptions(ownCertificate(smtp)), handshakeTimeout: smtp.idleTimeoutMs },
    (socket) => server.connect(socket, { id: randomBytes(10).toString('hex') }),
  );
  listener.maxConnections = smtp.maxClients;
  listener.on('tlsClientError', (err: Error & { code?: string }) =>
    log.debug({ error: err.message, code: err.code }, '[submission] TLS handshake failed'),
  );
  await new Promise<void>((resolve, reject) => {
    listener.once('error', reject);
    listener.listen(port, host, () => {
      listener.off('error', reject);
      resolve();
    });
  });
  const address = listener.address();
  return {
    port: typeof address === 'object' && address ? address.port : port,
    close: () =>
      new Promise<void>((resolve) => {
        listener.close(() => resolve());
        server.close(() => undefined);
      }),
  };
}
