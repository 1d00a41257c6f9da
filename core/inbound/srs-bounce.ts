import type { DomainRow } from '../domains/dto.js';
import { AppError } from '../errors.js';
import { isSrsLocal, SRS_MAX_AGE_DAYS, type Srs } from '../mail/srs.js';
import type { Forwarder } from '../mailboxes/forward.js';
import { parseMail } from '../parsing/pool.js';

const localOf = (address: string) => address.slice(0, Math.max(0, address.lastIndexOf('@')));
const domainOf = (address: string) => address.slice(address.lastIndexOf('@') + 1).toLowerCase();

/**
 * Mail to the SRS envelope sender of a forward (`SRS0=…@<forwarding domain>`, core/mail/srs.ts): a bounce
 * of the forward, or a reply to its envelope. At RCPT the address must carry a good hash and be at most
 * SRS_MAX_AGE_DAYS old, on a domain that receives mail here; a forged or expired one is refused (550 5.1.1).
 * At DATA the message is not stored as mail: it goes on, as it came, to the original sender, from the
 * forwarding domain (Forwarder.returnToSender: the outbound pipeline, the send gate and the caps).
 */
export function createSrsReturns(deps: {
  srs: Srs;
  forwarder: Forwarder;
  /** The verified receiving domain (MX verified) of a name, or undefined. */
  receivingDomain: (name: string) => Promise<DomainRow | undefined>;
}) {
  function original(address: string): string {
    const back = deps.srs.reverse(address);
    if (back === undefined || back === 'forged')
      throw new AppError(404, 'srs_invalid', `<${address}>: not a return address of this server`);
    if (back === 'expired')
      throw new AppError(404, 'srs_invalid', `<${address}>: return address older than ${SRS_MAX_AGE_DAYS} days`);
    return back.address;
  }

  async function domainFor(address: string): Promise<DomainRow> {
    const domain = await deps.receivingDomain(domainOf(address));
    if (!domain)
      throw new AppError(404, 'unknown_domain', `<${address}>: ${domainOf(address)} is not a verified domain here`);
    return domain;
  }

  return {
    isSrs: (address: string) => isSrsLocal(localOf(address)),

    /** RCPT TO of an SRS address: a good hash, not expired, on a receiving domain; else refused. */
    async check(address: string): Promise<void> {
      original(address);
      await domainFor(address);
    },

    /** DATA to SRS addresses: each goes back to its original sender; answers the outbound rows' ids. */
    async returnAll(raw: Buffer, rcpts: string[]): Promise<string[]> {
      const mail = await parseMail(raw);
      const ids: string[] = [];
      for (const rcpt of rcpts) {
        const to = original(rcpt);
        const domain = await domainFor(rcpt);
        ids.push(
          await deps.forwarder.returnToSender({
            userId: domain.userId,
            domainId: domain.id,
            srsAddress: rcpt,
            original: to,
            raw,
            mail,
          }),
        );
      }
      return ids;
    },
  };
}
export type SrsReturns = ReturnType<typeof createSrsReturns>;
