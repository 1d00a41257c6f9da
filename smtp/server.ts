import { SMTPServer } from 'smtp-server';
import type { Core } from '../core/index.js';
import { onRcptTo } from './on-rcpt-to.js';

export const MAX_MESSAGE_BYTES = 30 * 1024 * 1024;

/** The inbound SMTP server (port SMTP_PORT): receives mail for verified domains. */
export function createSmtpServer(core: Core): SMTPServer {
  return new SMTPServer({
    name: core.config.serviceDomain,
    banner: 'svc-mail ESMTP',
    authOptional: true,
    disabledCommands: ['AUTH', 'STARTTLS'],
    size: MAX_MESSAGE_BYTES,
    maxClients: 200,
    socketTimeout: 60_000,
    logger: false,
    onRcptTo: onRcptTo(core),
    onData(stream, _session, callback) {
      stream.resume();
      stream.on('end', () => callback(Object.assign(new Error('5.7.1 No recipient was accepted'), { responseCode: 554 })));
    },
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
