import { imapFlag } from '../../../core/mailboxes/flags.js';
import { subjectOf } from '../../../core/mailboxes/service.js';
import { headerValue, parseMime } from '../mime.js';
import { str } from '../parser.js';
import { bad, type Handler } from '../session.js';
import { sync } from '../view.js';
import { boxOf } from './mailbox.js';
import { bareAddress } from '../../../core/mail/recipients.js';

const MONTHS = ['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'];
/** `" 1-Feb-2024 10:00:00 +0100"` → ms. */
function parseDateTime(text: string): number {
  const m = /^\s?(\d{1,2})-([A-Za-z]{3})-(\d{4}) (\d{2}):(\d{2}):(\d{2}) ([+-])(\d{2})(\d{2})$/.exec(text);
  const month = m ? MONTHS.indexOf(m[2]!.toLowerCase()) : -1;
  if (!m || month < 0) throw bad('Invalid date-time');
  const offset = (m[7] === '-' ? -1 : 1) * (Number(m[8]) * 60 + Number(m[9])) * 60_000;
  return Date.UTC(Number(m[3]), month, Number(m[1]), Number(m[4]), Number(m[5]), Number(m[6])) - offset;
}

/** APPEND mailbox [(flags)] [date-time] literal: into the logged-in address's INBOX, Sent or Drafts, with APPENDUID. */
export const APPEND: Handler = async (s, cmd) => {
  const login = s.requireAuth();
  const args = [...cmd.args];
  const box = await boxOf(s, str(args.shift(), 'mailbox name'));
  let flags: string[] = [];
  const list = args[0]?.type === 'list' ? args.shift() : undefined;
  if (list?.type === 'list') {
    flags = list.items.map((t) => {
      const f = imapFlag(str(t, 'flag'));
      if (!f) throw bad('Invalid flag');
      return f;
    });
  }
  let date = Date.now();
  if (args.length > 1) date = parseDateTime(str(args.shift(), 'date-time'));
  const message = args.shift();
  if (!message || message.type !== 'string' || args.length) throw bad('APPEND needs the message as a literal');
  const raw = message.value;
  if (raw.length === 0) throw bad('Empty message');
  const from = headerValue(parseMime(raw), 'from') ?? login.address;
  const fromAddr = bareAddress(from);
  const subject = await subjectOf(raw).catch(() => null);
  // Past the storage quota the store refuses it: NO [OVERQUOTA] (answers.ts).
  const out = await s.core.mailboxStore.file(
    {
      userId: box.userId,
      domainId: box.domainId,
      address: box.address,
      folder: box.name as 'INBOX',
      raw,
      fromAddr,
      subject,
      flags,
      internalDate: date,
    },
    { quota: true },
  );
  if (s.view?.box.id === box.id) await sync(s, false);
  s.ok(cmd.tag, `[APPENDUID ${box.uidValidity} ${out!.uid}] APPEND completed`);
};
