import { SMTPServer } from 'smtp-server';
import type { Core } from '../core/index.js';
import { boundedOptions, createSmtpGuard } from './limits.js';
import { onData } from './on-data.js';
import { onRcptTo } from './on-rcpt-to.js';

/**
 * The inbound SMTP server (port SMTP_PORT): recipients on MX-verified domains only, a message size
 * limit (the rest of an oversized DATA is drained, never kept), bounded clients per server and per IP,
 * recipients per message, commands per minute and idle time; clients that talk before the greeting are
 * dropped (smtp-server's early-talker delay); STARTTLS (SMTP_TLS_KEY/SMTP_TLS_CERT files, else the
 * self-signed development certificate smtp-server ships).
 */
export function createSmtpServer(core: Pick<Core, 'config' | 'inbound'>): SMTPServer {
  const { smtp } = core.config;
  const guard = createSmtpGuard({ maxPerIp: smtp.maxClientsPerIp, commandsPerMinute: smtp.commandsPerMinute });
  const server = new SMTPServer({
    name: core.config.serviceDomain,
    banner: 'svc-mail ESMTP',
    authOptional: true,
    disabledCommands: ['AUTH'],
    ...boundedOptions(smtp, guard),
    rejectOversized: true,
    maxRecipients: smtp.maxRecipients,
    onRcptTo: onRcptTo(core),
    onData: onData(core, smtp.maxMessageBytes),
  });
  guard.attach(server);
  return server;
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
