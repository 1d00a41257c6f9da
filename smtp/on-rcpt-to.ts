import type { SMTPServerAddress, SMTPServerSession } from 'smtp-server';
import { isAppError } from '../core/errors.js';
import type { Core } from '../core/index.js';
import { logError } from '../core/log.js';

type SmtpReplyError = Error & { responseCode?: number };

/** RCPT TO: core decides; its error becomes the SMTP reply (5xx final, 4xx try later). */
export function onRcptTo(core: Core) {
  return (address: SMTPServerAddress, _session: SMTPServerSession, callback: (err?: Error | null) => void) => {
    core.inbound.checkRecipient(address.address).then(() => callback(), (err: unknown) => {
      const reply: SmtpReplyError = new Error(isAppError(err) ? err.message : '4.3.0 Temporary failure, try again later');
      reply.responseCode = isAppError(err) && err.status >= 400 && err.status < 600 ? err.status : 451;
      if (!isAppError(err)) logError('[smtp] RCPT check failed', err);
      callback(reply);
    });
  };
}
