import { imapFlag } from '../../../core/mailboxes/flags.js';
import { str, type Command, type Token } from '../parser.js';
import { bad, no, type Session } from '../session.js';
import { flagList, resolveSet, seqOf, sync } from '../view.js';

/** The flags of a STORE argument (a list or bare flags); `\Recent` is ignored, anything malformed refused. */
function flagsOf(tokens: Token[]): string[] {
  const names =
    tokens.length === 1 && tokens[0]!.type === 'list'
      ? tokens[0]!.items.map((t) => str(t, 'flag'))
      : tokens.map((t) => str(t, 'flag'));
  const out: string[] = [];
  for (const n of names) {
    if (n.toLowerCase() === '\\recent') continue;
    const f = imapFlag(n);
    if (!f) throw bad(`Invalid flag ${n.slice(0, 40)}`);
    if (!out.includes(f)) out.push(f);
  }
  return out;
}

/** STORE and UID STORE: FLAGS, +FLAGS, -FLAGS, each optionally .SILENT. */
export async function store(s: Session, cmd: Command, args: Token[], byUid: boolean): Promise<void> {
  const view = s.requireSelected();
  if (view.readOnly) throw no('The mailbox is open read-only (EXAMINE)', 'READ-ONLY');
  const uids = resolveSet(view, str(args[0], 'sequence set'), byUid);
  const m = /^([+-]?)FLAGS(\.SILENT)?$/i.exec(str(args[1], 'FLAGS, +FLAGS or -FLAGS'));
  if (!m) throw bad('Expected FLAGS, +FLAGS or -FLAGS');
  const flags = flagsOf(args.slice(2));
  const op = m[1];
  const next = (old: string[]) =>
    op === '+'
      ? [...old, ...flags.filter((f) => !old.includes(f))]
      : op === '-'
        ? old.filter((f) => !flags.includes(f))
        : flags;
  const rows = uids.length ? await s.core.mailboxStore.setFlags(view.box.id, uids, next) : [];
  for (const r of rows) {
    view.flags.set(r.uid, r.flags);
    if (!m[2]) s.untagged(`${seqOf(view, r.uid)} FETCH (${byUid ? `UID ${r.uid} ` : ''}FLAGS ${flagList(r.flags)})`);
  }
  if (byUid) await sync(s, true);
  s.ok(cmd.tag, `${byUid ? 'UID ' : ''}STORE completed`);
}
