import { readFileSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { createServer as createTlsServer, type TlsOptions } from 'node:tls';
import getTLSOptions from 'smtp-server/lib/tls-options';
import type { ImapDeps } from './deps.js';
import { imapSessions, imapSessionsOpened } from '../../core/metrics.js';
import { clientKey } from '../../core/net/client-address.js';
import { HANDLERS } from './commands/index.js';
import { Session, type ImapOptions } from './session.js';

export type ImapServers = { port: number; tlsPort: number; close(): Promise<void> };

/**
 * The IMAP server: IMAP_PORT (plain, STARTTLS offered) and IMAPS_PORT (implicit TLS), with the
 * certificate settings of the SMTP ingress (SMTP_TLS_KEY/SMTP_TLS_CERT, else smtp-server's
 * self-signed development certificate).
 */
export async function startImap(
  core: ImapDeps,
  opts: { port: number; tlsPort: number; host?: string },
): Promise<ImapServers> {
  const { smtp, imap } = core.config;
  const tls: TlsOptions = getTLSOptions(
    smtp.tlsKeyFile && smtp.tlsCertFile
      ? { key: readFileSync(smtp.tlsKeyFile), cert: readFileSync(smtp.tlsCertFile) }
      : {},
  );
  const options: ImapOptions = {
    core,
    tls,
    maxLiteral: imap.maxLiteralBytes,
    idleTimeoutMs: imap.idleTimeoutMs,
    loginTimeoutMs: imap.loginTimeoutMs,
    commandTimeoutMs: imap.commandTimeoutMs,
    pollMs: imap.pollMs,
    preauthCommands: imap.preauthCommands,
  };
  const sockets = new Set<Socket>();
  // Open connections per client address, both ports together: one address cannot take every slot.
  const perIp = new Map<string, number>();
  const accept = (socket: Socket) => {
    const ip = socket.remoteAddress ?? '';
    const key = clientKey(ip); // an IPv6 client counts by its /64
    socket.on('error', () => undefined);
    const open = perIp.get(key) ?? 0;
    if (open >= imap.maxClientsPerIp) {
      socket.end('* BYE Too many connections from your address, try again later\r\n');
      setTimeout(() => socket.destroy(), 1000).unref();
      return;
    }
    perIp.set(key, open + 1);
    sockets.add(socket);
    imapSessions.inc();
    imapSessionsOpened.inc();
    socket.once('close', () => {
      sockets.delete(socket);
      imapSessions.dec();
      const left = (perIp.get(key) ?? 1) - 1;
      if (left <= 0) perIp.delete(key);
      else perIp.set(key, left);
    });
    new Session(socket, options, HANDLERS, ip);
  };
  const plain = createServer(accept);
  const secure = createTlsServer(tls, accept);
  plain.maxConnections = imap.maxClients;
  secure.maxConnections = imap.maxClients;
  secure.on('tlsClientError', () => undefined);
  const host = opts.host ?? '0.0.0.0';
  const listen = (server: Server, port: number) =>
    new Promise<number>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => {
        server.off('error', reject);
        resolve((server.address() as { port: number }).port);
      });
    });
  const port = await listen(plain, opts.port);
  const tlsPort = await listen(secure, opts.tlsPort).catch(async (err) => {
    plain.close();
    throw err;
  });
  return {
    port,
    tlsPort,
    async close() {
      for (const s of sockets) s.destroy();
      await Promise.all([plain, secure].map((srv) => new Promise<void>((r) => srv.close(() => r()))));
    },
  };
}
