import type { MailboxRow } from '../../core/mailboxes/store.js';
import { intervals, lowerBound, parseSequenceSet } from './sequence.js';
import { bad, type Session, type View } from './session.js';

/** A flag set as an IMAP parenthesized list. */
export const flagList = (flags: string[]) => `(${flags.join(' ')})`;

/** Opens a folder as the session's view: its UIDs and flags now. */
export async function openView(s: Session, box: MailboxRow, readOnly: boolean): Promise<View> {
  const index = await s.core.mailboxStore.index(box.id);
  return { box, readOnly, uids: index.map((r) => r.uid), flags: new Map(index.map((r) => [r.uid, r.flags])) };
}

/**
 * Tells the client what changed in the selected folder since it last looked: expunges (only when
 * `expunges` is allowed, RFC 3501 §7.4.1), new messages (EXISTS) and flag changes made elsewhere.
 */
export async function sync(s: Session, expunges: boolean): Promise<void> {
  const view = s.view;
  if (!view) return;
  const index = await s.core.mailboxStore.index(view.box.id);
  const now = new Map(index.map((r) => [r.uid, r.flags]));
  if (expunges) {
    for (let i = view.uids.length - 1; i >= 0; i--) {
      const uid = view.uids[i]!;
      if (now.has(uid)) continue;
      view.uids.splice(i, 1);
      view.flags.delete(uid);
      s.untagged(`${i + 1} EXPUNGE`);
    }
  }
  for (const [i, uid] of view.uids.entries()) {
    const flags = now.get(uid);
    if (flags && flags.join(' ') !== view.flags.get(uid)?.join(' ')) {
      view.flags.set(uid, flags);
      s.untagged(`${i + 1} FETCH (UID ${uid} FLAGS ${flagList(flags)})`);
    }
  }
  const last = view.uids.at(-1) ?? 0;
  const added = index.filter((r) => r.uid > last);
  if (added.length) {
    for (const r of added) {
      view.uids.push(r.uid);
      view.flags.set(r.uid, r.flags);
    }
    s.untagged(`${view.uids.length} EXISTS`);
  }
}

/**
 * The UIDs a sequence set names, by message sequence number or (for UID commands) by UID: the set's
 * intervals sorted and merged, each located by binary search, so O(ranges log n + answer) whatever the set.
 */
export function resolveSet(view: View, text: string, byUid: boolean): number[] {
  const ranges = parseSequenceSet(text);
  if (!ranges) throw bad(`Invalid sequence set ${text.slice(0, 50)}`);
  const uids = view.uids;
  const out: number[] = [];
  for (const [a, b] of intervals(ranges, byUid ? (uids.at(-1) ?? 0) : uids.length)) {
    const from = byUid ? lowerBound(uids, a) : Math.max(0, a - 1);
    const to = byUid ? lowerBound(uids, b + 1) : Math.min(b, uids.length);
    for (let i = from; i < to; i++) out.push(uids[i]!);
  }
  return out;
}

/** The message sequence number of a UID in the session's view (0 when absent), by binary search. */
export const seqOf = (view: View, uid: number) => {
  const i = lowerBound(view.uids, uid);
  return view.uids[i] === uid ? i + 1 : 0;
};
