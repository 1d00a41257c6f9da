import type { SMTPServerAddress, SMTPServerSession } from 'smtp-server';
import type { Core } from '../core/index.js';
import { logError } from '../core/log.js';
import { isFault, smtpError } from './replies.js';

/**
 * RCPT TO: core decides, with the envelope sender and the client's address (the domain's sender rules); its
 * error becomes the SMTP reply (smtp/replies.ts: 5xx final, 4xx try later).
 */
export function onRcptTo(core: Pick<Core, 'inbound'>) {
  return (address: SMTPServerAddress, session: SMTPServerSession, callback: (err?: Error | null) => void) => {
    const from = session.envelope.mailFrom ? session.envelope.mailFrom.address : '';
    core.inbound.checkRecipient(address.address, { from, ip: session.remoteAddress }).then(
      () => callback(),
      (err: unknown) => {
        if (isFault(err)) logError('[smtp] RCPT check failed', err);
        callback(smtpError(err, 'rcpt'));
      },
    );
  };
}
