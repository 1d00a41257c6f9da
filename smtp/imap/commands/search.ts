import { str, type Command, type Token } from '../parser.js';
import { countKeys, matches, parseSearch, WorkBudget } from '../search.js';
import { bad, type Session } from '../session.js';
import { seqOf, sync } from '../view.js';
import { LIMITS } from '../session.js';

/** SEARCH and UID SEARCH (CHARSET US-ASCII or UTF-8 only). */
export async function search(s: Session, cmd: Command, args: Token[], byUid: boolean): Promise<void> {
  const view = s.requireSelected();
  const tokens = [...args];
  if (tokens[0] && tokens[0].type !== 'list' && str(tokens[0]).toUpperCase() === 'CHARSET') {
    tokens.shift();
    const cs = str(tokens.shift(), 'charset').toUpperCase();
    if (cs !== 'UTF-8' && cs !== 'US-ASCII') throw bad(`Unsupported charset ${cs}`, 'BADCHARSET (UTF-8 US-ASCII)');
  }
  if (tokens.length === 0) throw bad('SEARCH needs search keys');
  const keys = countKeys(tokens);
  const predicate = parseSearch(tokens);
  const ctx = { maxSeq: view.uids.length, maxUid: view.uids.at(-1) ?? 0 };
  const budget = new WorkBudget(LIMITS.work, 'This SEARCH');
  const hits: number[] = [];
  // Raw messages a few at a time (LIMITS.rawBatch), metadata in larger pages.
  const step = predicate.needsRaw ? LIMITS.rawBatch : 500;
  for (let i = 0; i < view.uids.length; i += step) {
    const chunk = view.uids.slice(i, i + step);
    const rows = predicate.needsRaw
      ? await s.core.mailboxStore.full(view.box.id, chunk)
      : await s.core.mailboxStore.meta(view.box.id, chunk);
    for (const row of rows) {
      const seq = seqOf(view, row.uid);
      const r = {
        uid: row.uid,
        seq,
        flags: row.flags,
        internalDate: row.internalDate,
        size: row.size,
        raw: 'raw' in row ? (row.raw as Buffer) : undefined,
      };
      if (matches(predicate, r, ctx, budget, keys)) hits.push(byUid ? row.uid : seq);
    }
  }
  s.untagged(`SEARCH${hits.length ? ` ${hits.join(' ')}` : ''}`);
  if (byUid) await sync(s, true);
  s.ok(cmd.tag, `${byUid ? 'UID ' : ''}SEARCH completed`);
}
