import type { MailboxMessage, MessageMeta } from '../../../core/mailboxes/store.js';
import { bodyStructure, envelope, sectionBytes, validSection } from '../fetch-render.js';
import { parseMime, type MimeNode } from '../mime.js';
import { str, type Command, type Token } from '../parser.js';
import { WorkBudget } from '../search.js';
import { bad, LIMITS, type Session } from '../session.js';
import { flagList, resolveSet, seqOf, sync } from '../view.js';

type Item =
  | { kind: 'FLAGS' | 'UID' | 'INTERNALDATE' | 'RFC822.SIZE' | 'ENVELOPE' | 'BODYSTRUCTURE' | 'BODY' }
  | { kind: 'section'; label: string; section: string; peek: boolean; partial?: [number, number] };

const MACROS: Record<string, string[]> = {
  ALL: ['FLAGS', 'INTERNALDATE', 'RFC822.SIZE', 'ENVELOPE'],
  FAST: ['FLAGS', 'INTERNALDATE', 'RFC822.SIZE'],
  FULL: ['FLAGS', 'INTERNALDATE', 'RFC822.SIZE', 'ENVELOPE', 'BODY'],
};
const SIMPLE = new Set(['FLAGS', 'UID', 'INTERNALDATE', 'RFC822.SIZE', 'ENVELOPE', 'BODYSTRUCTURE', 'BODY']);
const SECTION = /^BODY(\.PEEK)?\[(.*)\](?:<(\d{1,10})(?:\.(\d{1,10}))?>)?$/is;
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

/** INTERNALDATE as RFC 3501 writes it: `"17-Jul-1996 02:44:25 +0000"`. */
export function imapDate(ms: number): string {
  const d = new Date(ms);
  const p = (n: number) => String(n).padStart(2, '0');
  return `"${p(d.getUTCDate())}-${MONTHS[d.getUTCMonth()]}-${d.getUTCFullYear()} ${p(d.getUTCHours())}:${p(d.getUTCMinutes())}:${p(d.getUTCSeconds())} +0000"`;
}

function parseItem(name: string): Item[] {
  const upper = name.toUpperCase();
  if (MACROS[upper]) return MACROS[upper].map((k) => ({ kind: k }) as Item);
  if (SIMPLE.has(upper)) return [{ kind: upper } as Item];
  if (upper === 'RFC822') return [{ kind: 'section', label: 'RFC822', section: '', peek: false }];
  if (upper === 'RFC822.HEADER') return [{ kind: 'section', label: 'RFC822.HEADER', section: 'HEADER', peek: true }];
  if (upper === 'RFC822.TEXT') return [{ kind: 'section', label: 'RFC822.TEXT', section: 'TEXT', peek: false }];
  const m = SECTION.exec(name);
  if (!m || !validSection(m[2]!)) throw bad(`Unknown FETCH item ${name.slice(0, 60)}`);
  const partial: [number, number] | undefined =
    m[3] !== undefined ? [Number(m[3]), m[4] !== undefined ? Number(m[4]) : Number.MAX_SAFE_INTEGER] : undefined;
  return [{ kind: 'section', label: `BODY[${m[2]!.toUpperCase()}]`, section: m[2]!, peek: Boolean(m[1]), partial }];
}

/** The data items of a FETCH (one item, a macro, or a list). */
export function parseItems(t: Token | undefined): Item[] {
  if (!t) throw bad('FETCH needs data items');
  const names = t.type === 'list' ? t.items.map((i) => str(i, 'fetch item')) : [str(t, 'fetch item')];
  if (names.length === 0) throw bad('FETCH needs data items');
  if (names.length > LIMITS.fetchItems) throw bad(`FETCH takes at most ${LIMITS.fetchItems} data items`);
  return names.flatMap(parseItem);
}

/** FETCH and UID FETCH: renders each message's items; non-PEEK body sections set \Seen. */
export async function fetch(s: Session, cmd: Command, args: Token[], byUid: boolean): Promise<void> {
  const view = s.requireSelected();
  const uids = resolveSet(view, str(args[0], 'sequence set'), byUid);
  const items = parseItems(args[1]);
  if (byUid && !items.some((i) => i.kind === 'UID')) items.unshift({ kind: 'UID' });
  const needRaw = items.some((i) => !['FLAGS', 'UID', 'INTERNALDATE', 'RFC822.SIZE'].includes(i.kind));
  const setsSeen = !view.readOnly && items.some((i) => i.kind === 'section' && !i.peek);
  if (setsSeen) {
    const unseen = uids.filter((u) => !view.flags.get(u)?.includes('\\Seen'));
    if (unseen.length)
      for (const r of await s.core.mailboxStore.setFlags(view.box.id, unseen, (f) => [...f, '\\Seen']))
        view.flags.set(r.uid, r.flags);
    if (!items.some((i) => i.kind === 'FLAGS')) items.push({ kind: 'FLAGS' });
  }
  // A few raw messages at a time (a whole mailbox of them is never held), each parsed at most once, every
  // byte parsed or rendered charged to the command's budget before the work is done.
  const budget = new WorkBudget(LIMITS.fetchWork, 'This FETCH');
  const step = needRaw ? LIMITS.rawBatch : 500;
  for (let i = 0; i < uids.length; i += step) {
    const chunk = uids.slice(i, i + step);
    const rows: (MessageMeta | MailboxMessage)[] = needRaw
      ? await s.core.mailboxStore.full(view.box.id, chunk)
      : await s.core.mailboxStore.meta(view.box.id, chunk);
    for (const row of rows) {
      // Flags as stored now (another session or the mailbox API may have changed them).
      view.flags.set(row.uid, row.flags);
      s.untagged([`${seqOf(view, row.uid)} FETCH (`, ...render(row, items, row.flags, budget), ')']);
      await s.drained();
    }
  }
  if (byUid) await sync(s, true);
  s.ok(cmd.tag, `${byUid ? 'UID ' : ''}FETCH completed`);
}

function render(
  row: MessageMeta | MailboxMessage,
  items: Item[],
  flags: string[],
  budget: WorkBudget,
): (string | Buffer)[] {
  const out: (string | Buffer)[] = [];
  const raw = 'raw' in row ? row.raw : Buffer.alloc(0);
  let tree: MimeNode | undefined;
  const root = () => {
    if (!tree) {
      budget.charge(raw.length);
      tree = parseMime(raw);
    }
    return tree;
  };
  budget.charge(items.length * 64);
  // One message's answer holds at most its sections twice over (BODY[] and BODY[TEXT] together, say).
  const ownBudget = new WorkBudget(2 * row.size + 64 * 1024, 'This FETCH of one message');
  for (const item of items) {
    if (out.length) out.push(' ');
    switch (item.kind) {
      case 'UID':
        out.push(`UID ${row.uid}`);
        break;
      case 'FLAGS':
        out.push(`FLAGS ${flagList(flags)}`);
        break;
      case 'INTERNALDATE':
        out.push(`INTERNALDATE ${imapDate(row.internalDate)}`);
        break;
      case 'RFC822.SIZE':
        out.push(`RFC822.SIZE ${row.size}`);
        break;
      case 'ENVELOPE':
        out.push('ENVELOPE ', envelope(root()));
        break;
      case 'BODYSTRUCTURE':
        out.push('BODYSTRUCTURE ', bodyStructure(root(), true));
        break;
      case 'BODY':
        out.push('BODY ', bodyStructure(root(), false));
        break;
      case 'section': {
        let bytes = sectionBytes(raw, root, item.section);
        let label = item.label;
        if (item.partial) {
          const [start, len] = item.partial;
          bytes = bytes.subarray(start, start + len);
          label += `<${start}>`;
        }
        ownBudget.charge(bytes.length);
        budget.charge(bytes.length);
        out.push(`${label} `, bytes.length === 0 ? '""' : Buffer.concat([Buffer.from(`{${bytes.length}}\r\n`), bytes]));
        break;
      }
    }
  }
  return out;
}
