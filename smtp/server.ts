import { readFileSync } from 'node:fs';
import { SMTPServer } from 'smtp-server';
import type { Core } from '../core/index.js';
import { onData } from './on-data.js';
import { onRcptTo } from './on-rcpt-to.js';

/**
 * The inbound SMTP server (port SMTP_PORT): recipients on MX-verified domains only, a message size
 * limit, bounded clients and idle time, and STARTTLS (SMTP_TLS_KEY/SMTP_TLS_CERT files, else the
 * self-signed development certificate smtp-server ships).
 */
export function createSmtpServer(core: Core): SMTPServer {
  const { smtp } = core.config;
  const tls = smtp.tlsKeyFile && smtp.tlsCertFile ? { key: readFileSync(smtp.tlsKeyFile), cert: readFileSync(smtp.tlsCertFile) } : {};
  return new SMTPServer({
    name: core.config.serviceDomain,
    banner: 'svc-mail ESMTP',
    authOptional: true,
    disabledCommands: ['AUTH'],
    size: smtp.maxMessageBytes,
    maxClients: smtp.maxClients,
    socketTimeout: smtp.idleTimeoutMs,
    closeTimeout: 5_000,
    logger: false,
    ...tls,
    onRcptTo: onRcptTo(core),
    onData: onData(core, smtp.maxMessageBytes),
  });
}

export async function listenSmtp(server: SMTPServer, port: number, host = '0.0.0.0'): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.server.once('error', reject);
    server.listen(port, host, () => {
      server.server.off('error', reject);
      resolve();
    });
  });
  const addr = server.server.address();
  return typeof addr === 'object' && addr ? addr.port : port;
}
