import { FOLDERS, type Folder, type MailboxRow } from '../../../core/mailboxes/store.js';
import { PERMANENT_FLAGS } from '../../../core/mailboxes/flags.js';
import { str } from '../parser.js';
import { globMatch } from '../glob.js';
import { istr } from '../quote.js';
import { bad, no, type Handler, type Session } from '../session.js';
import { flagList, openView } from '../view.js';

const ATTRS: Record<Folder, string> = {
  INBOX: '\\HasNoChildren',
  Sent: '\\HasNoChildren \\Sent',
  Drafts: '\\HasNoChildren \\Drafts',
};

/** The folder an IMAP mailbox name means (INBOX in any case), or NO [NONEXISTENT]. */
export function folderOf(name: string): Folder {
  const f = FOLDERS.find((x) => x.toLowerCase() === name.toLowerCase());
  if (!f)
    throw no(`No mailbox named ${JSON.stringify(name.slice(0, 100))}; there are INBOX, Sent and Drafts`, 'NONEXISTENT');
  return f;
}

/** The folder row of the logged-in address (created on first use). */
export async function boxOf(s: Session, name: string): Promise<MailboxRow> {
  const login = s.requireAuth();
  return s.core.mailboxStore.ensure({
    userId: login.userId,
    domainId: login.domainId,
    address: login.address,
    folder: folderOf(name),
  });
}

const listing =
  (verb: 'LIST' | 'LSUB'): Handler =>
  async (s, cmd) => {
    s.requireAuth();
    const ref = str(cmd.args[0], 'reference');
    const pattern = str(cmd.args[1], 'mailbox pattern');
    if (pattern === '' && verb === 'LIST') s.untagged('LIST (\\Noselect) "/" ""');
    else {
      for (const f of FOLDERS) if (globMatch(ref + pattern, f)) s.untagged(`${verb} (${ATTRS[f]}) "/" ${f}`);
    }
    s.ok(cmd.tag, `${verb} completed`);
  };
export const LIST = listing('LIST');
export const LSUB = listing('LSUB');

const open =
  (readOnly: boolean): Handler =>
  async (s, cmd) => {
    s.requireAuth();
    s.view = undefined;
    s.state = 'auth';
    const box = await boxOf(s, str(cmd.args[0], 'mailbox name'));
    const view = await openView(s, box, readOnly);
    const unseen = view.uids.findIndex((u) => !view.flags.get(u)?.includes('\\Seen'));
    s.untagged(`FLAGS ${flagList(PERMANENT_FLAGS)}`);
    s.untagged(`OK [PERMANENTFLAGS ${readOnly ? '()' : flagList([...PERMANENT_FLAGS, '\\*'])}] Flags permitted`);
    s.untagged(`${view.uids.length} EXISTS`);
    s.untagged('0 RECENT');
    if (unseen >= 0) s.untagged(`OK [UNSEEN ${unseen + 1}] First unseen`);
    s.untagged(`OK [UIDVALIDITY ${box.uidValidity}] UIDs valid`);
    s.untagged(`OK [UIDNEXT ${Math.max(box.uidNext, (view.uids.at(-1) ?? 0) + 1)}] Predicted next UID`);
    s.view = view;
    s.state = 'selected';
    s.ok(cmd.tag, `[${readOnly ? 'READ-ONLY' : 'READ-WRITE'}] ${readOnly ? 'EXAMINE' : 'SELECT'} completed`);
  };
export const SELECT = open(false);
export const EXAMINE = open(true);

export const STATUS: Handler = async (s, cmd) => {
  const box = await boxOf(s, str(cmd.args[0], 'mailbox name'));
  const items = cmd.args[1];
  if (!items || items.type !== 'list') throw bad('STATUS needs a list of items');
  const index = await s.core.mailboxStore.index(box.id);
  const fresh = (await s.core.mailboxStore.byId(box.id)) ?? box;
  const out: string[] = [];
  for (const it of items.items) {
    const name = str(it).toUpperCase();
    if (name === 'MESSAGES') out.push(`MESSAGES ${index.length}`);
    else if (name === 'RECENT') out.push('RECENT 0');
    else if (name === 'UIDNEXT') out.push(`UIDNEXT ${Math.max(fresh.uidNext, (index.at(-1)?.uid ?? 0) + 1)}`);
    else if (name === 'UIDVALIDITY') out.push(`UIDVALIDITY ${fresh.uidValidity}`);
    else if (name === 'UNSEEN') out.push(`UNSEEN ${index.filter((r) => !r.flags.includes('\\Seen')).length}`);
    else throw bad(`Unknown STATUS item ${name}`);
  }
  s.untagged(['STATUS ', istr(box.name), ` (${out.join(' ')})`]);
  s.ok(cmd.tag, 'STATUS completed');
};

const fixed: Handler = async (s) => {
  s.requireAuth();
  throw no('The folders are fixed: INBOX, Sent and Drafts', 'CANNOT');
};
export const CREATE = fixed;
export const DELETE = fixed;
export const RENAME = fixed;

const subscription: Handler = async (s, cmd) => {
  await boxOf(s, str(cmd.args[0], 'mailbox name'));
  s.ok(cmd.tag, `${cmd.name} completed`);
};
export const SUBSCRIBE = subscription;
export const UNSUBSCRIBE = subscription;

/** CLOSE expunges silently (unless read-only); UNSELECT does not. */
const leave =
  (expunge: boolean): Handler =>
  async (s, cmd) => {
    const view = s.requireSelected();
    if (expunge && !view.readOnly) await s.core.mailboxStore.expunge(view.box.id);
    s.view = undefined;
    s.state = 'auth';
    s.ok(cmd.tag, `${cmd.name} completed`);
  };
export const CLOSE = leave(true);
export const UNSELECT = leave(false);
