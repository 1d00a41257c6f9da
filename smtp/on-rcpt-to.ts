import type { SMTPServerAddress, SMTPServerSession } from 'smtp-server';
import type { Core } from '../core/index.js';
import { logError } from '../core/log.js';
import { isFault, smtpError } from './replies.js';

/** RCPT TO: core decides; its error becomes the SMTP reply (smtp/replies.ts: 5xx final, 4xx try later). */
export function onRcptTo(core: Pick<Core, 'inbound'>) {
  return (address: SMTPServerAddress, _session: SMTPServerSession, callback: (err?: Error | null) => void) => {
    core.inbound.checkRecipient(address.address).then(
      () => callback(),
      (err: unknown) => {
        if (isFault(err)) logError('[smtp] RCPT check failed', err);
        callback(smtpError(err, 'rcpt'));
      },
    );
  };
}
