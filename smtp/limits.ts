import { readFileSync } from 'node:fs';
import type { SMTPServer, SMTPServerSession } from 'smtp-server';
import type { Config } from '../core/config.js';
import { AppError, tooMany } from '../core/errors.js';
import { rateLimitRefusals } from '../core/metrics.js';
import { clientKey } from '../core/net/client-address.js';
import { log } from '../core/log.js';
import { replyText, smtpError, smtpReplyOf } from './replies.js';

/** A client past the command rate (counted once per window, below, not at each refused command). */
const tooFast = new AppError(429, 'smtp_commands', 'Too many commands, slow down', true);

/** What the connection guard needs from the server (smtp-server keeps its live connections in a Set). */
type Connection = { id: string; send(code: number, message: string): void };

/**
 * Per-IP connection cap and per-connection command rate for the inbound SMTP server. smtp-server has no
 * per-command hook, but it logs every command (`tnx: 'command'`) to the logger it is given, so the
 * rate is counted there and a client over it is answered `smtp_commands` (smtp/replies.ts) and disconnected.
 */
export function createSmtpGuard(opts: { maxPerIp: number; commandsPerMinute: number }) {
  const perIp = new Map<string, number>();
  const rates = new Map<string, { start: number; count: number }>();
  const servers: SMTPServer[] = [];

  function onCommand(cid: string): void {
    const now = Date.now();
    const w = rates.get(cid);
    if (!w || now - w.start >= 60_000) return void rates.set(cid, { start: now, count: 1 });
    w.count += 1;
    if (w.count <= opts.commandsPerMinute) return;
    if (w.count === opts.commandsPerMinute + 1) rateLimitRefusals.inc({ code: 'smtp_commands' });
    const r = smtpReplyOf(tooFast, 'command');
    for (const s of servers) {
      const connections = (s as unknown as { connections?: Set<Connection> }).connections;
      for (const c of connections ?? []) if (c.id === cid) c.send(r.code, replyText(r));
    }
  }

  return {
    /** The servers whose connections this guard counts (the submission role's two listeners share one). */
    attach(s: SMTPServer) {
      servers.push(s);
      // smtp-server emits a client's socket failures on the server (a TCP probe closing before the TLS
      // handshake of an implicit-TLS listener, a reset mid-session): without a listener one would end the process.
      s.on('error', (err: Error & { code?: string }) =>
        log.debug({ error: err.message, code: err.code }, '[smtp] client connection failed'),
      );
    },
    /** A bunyan-shaped logger that sees each command and says nothing. */
    logger: {
      debug(entry: { tnx?: string; cid?: string }) {
        if (entry?.tnx === 'command' && entry.cid) onCommand(entry.cid);
      },
      trace: () => undefined,
      info: () => undefined,
      warn: () => undefined,
      error: () => undefined,
      fatal: () => undefined,
    },
    /** onConnect: at most `maxPerIp` open sessions per client address. */
    onConnect(session: SMTPServerSession, callback: (err?: Error | null) => void) {
      const ip = session.remoteAddress;
      const key = clientKey(ip); // an IPv6 client counts by its /64
      const open = perIp.get(key) ?? 0;
      // tooMany counts the refusal in svc_rate_limit_refusals_total.
      if (open >= opts.maxPerIp) {
        return callback(
          smtpError(tooMany(`Too many connections from ${ip}, try again later`, 'smtp_connections'), 'connect'),
        );
      }
      perIp.set(key, open + 1);
      (session as SMTPServerSession & { counted?: boolean }).counted = true;
      callback();
    },
    /** onClose: releases the session's slot and its rate window. */
    onClose(session: SMTPServerSession) {
      rates.delete(session.id);
      if (!(session as SMTPServerSession & { counted?: boolean }).counted) return;
      const key = clientKey(session.remoteAddress);
      const left = (perIp.get(key) ?? 1) - 1;
      if (left <= 0) perIp.delete(key);
      else perIp.set(key, left);
    },
  };
}
export type SmtpGuard = ReturnType<typeof createSmtpGuard>;

/** The operator's certificate (SMTP_TLS_KEY and SMTP_TLS_CERT), or undefined: smtp-server's development one. */
export function ownCertificate(smtp: Config['smtp']): { key: Buffer; cert: Buffer } | undefined {
  return smtp.tlsKeyFile && smtp.tlsCertFile
    ? { key: readFileSync(smtp.tlsKeyFile), cert: readFileSync(smtp.tlsCertFile) }
    : undefined;
}

/** The bounds every SMTP server here keeps (ingress and submission): clients, idle time, the guard's hooks, the certificate. */
export function boundedOptions(smtp: Config['smtp'], guard: SmtpGuard) {
  return {
    size: smtp.maxMessageBytes,
    maxClients: smtp.maxClients,
    socketTimeout: smtp.idleTimeoutMs,
    closeTimeout: 5_000,
    logger: guard.logger as never,
    ...ownCertificate(smtp),
    onConnect: guard.onConnect,
    onClose: guard.onClose,
  };
}
