import { str, type Command, type Token } from '../parser.js';
import { formatSet } from '../sequence.js';
import { no, type Session, type View } from '../session.js';
import { resolveSet, sync } from '../view.js';
import { boxOf } from './mailbox.js';

/** Tells the client these UIDs are gone (highest sequence number first, so each number stays right). */
function announceExpunged(s: Session, view: View, gone: number[]): void {
  const set = new Set(gone);
  for (let i = view.uids.length - 1; i >= 0; i--) {
    const uid = view.uids[i]!;
    if (!set.has(uid)) continue;
    view.uids.splice(i, 1);
    view.flags.delete(uid);
    s.untagged(`${i + 1} EXPUNGE`);
  }
}

/** COPY / MOVE (and their UID forms) into another folder of the same address, with COPYUID. */
export async function copy(s: Session, cmd: Command, args: Token[], byUid: boolean, move: boolean): Promise<void> {
  const view = s.requireSelected();
  if (move && view.readOnly) throw no('The mailbox is open read-only (EXAMINE)', 'READ-ONLY');
  const uids = resolveSet(view, str(args[0], 'sequence set'), byUid);
  const target = await boxOf(s, str(args[1], 'mailbox name'));
  // A copy takes storage (all of it or none, NO [OVERQUOTA] over the quota); a move shares the body and takes none.
  const pairs = await s.core.mailboxStore.copy(view.box.id, uids, target, move ? { share: true } : { quota: true });
  const code = pairs.length
    ? `[COPYUID ${target.uidValidity} ${formatSet(pairs.map((p) => p[0]))} ${formatSet(pairs.map((p) => p[1]))}] `
    : '';
  if (move) {
    if (code) s.untagged(`OK ${code}Moved`);
    await s.core.mailboxStore.remove(
      view.box.id,
      pairs.map((p) => p[0]),
    );
    announceExpunged(
      s,
      view,
      pairs.map((p) => p[0]),
    );
    s.ok(cmd.tag, `${byUid ? 'UID ' : ''}MOVE completed`);
    return;
  }
  if (byUid) await sync(s, true);
  s.ok(cmd.tag, `${code}${byUid ? 'UID ' : ''}COPY completed`);
}

/** EXPUNGE, and UID EXPUNGE limited to a UID set (UIDPLUS). */
export async function expunge(s: Session, cmd: Command, args: Token[], byUid: boolean): Promise<void> {
  const view = s.requireSelected();
  if (view.readOnly) throw no('The mailbox is open read-only (EXAMINE)', 'READ-ONLY');
  const only = byUid ? resolveSet(view, str(args[0], 'UID set'), true) : undefined;
  const gone = await s.core.mailboxStore.expunge(view.box.id, only);
  announceExpunged(s, view, gone);
  await sync(s, true);
  s.ok(cmd.tag, `${byUid ? 'UID ' : ''}EXPUNGE completed`);
}
