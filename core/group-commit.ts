import { isTransientDbError } from './retry.js';

type Waiting<T, R> = { item: T; resolve: (v: R) => void; reject: (err: unknown) => void };

/**
 * Group commit (DESIGN.md, The Temporal budget, applied to the database): an item goes out at once when
 * fewer than `maxInFlight` writes are under way; items that arrive while they all are share the next write. At low load nothing
 * waits; under load one statement carries many items. A caller's promise settles once its item's write has
 * (it resolves with `answer(item)` of the write it was in).
 *
 * `take` chooses the next group from what waits (default: the first `max` items; it must take at least one).
 * When a shared write fails, nothing of it was written: with `alone` set, each item is then written on its own
 * (in order), so a bad row fails only its own caller; a transient database error (a lost connection) fails
 * every caller at once instead, and each tries again as it would. Without `alone` every caller gets the error.
 */
export function createGroupCommit<T, R = void>(opts: {
  write(items: T[]): Promise<(item: T) => R>;
  max?: number;
  take?(pending: T[]): number[];
  alone?: boolean;
  /** Writes under way at once (default 1); with more, a caller waits on a write only when all are busy. */
  maxInFlight?: number;
}) {
  const pending: Waiting<T, R>[] = [];
  const maxInFlight = opts.maxInFlight ?? 1;
  let inFlight = 0;

  function take(): Waiting<T, R>[] {
    if (!opts.take) return pending.splice(0, opts.max ?? 100);
    const picked = new Set(opts.take(pending.map((w) => w.item)));
    const group = pending.filter((_, i) => picked.has(i));
    const rest = pending.filter((_, i) => !picked.has(i));
    pending.splice(0, pending.length, ...rest);
    return group;
  }

  async function flush(group: Waiting<T, R>[]): Promise<void> {
    try {
      const answer = await opts.write(group.map((w) => w.item));
      group.forEach((w) => w.resolve(answer(w.item)));
    } catch (err) {
      if (!opts.alone || group.length === 1 || isTransientDbError(err)) return group.forEach((w) => w.reject(err));
      for (const w of group)
        await opts.write([w.item]).then(
          (answer) => w.resolve(answer(w.item)),
          (e: unknown) => w.reject(e),
        );
    }
  }

  function pump(): void {
    while (inFlight < maxInFlight && pending.length > 0) {
      inFlight++;
      void flush(take()).finally(() => {
        inFlight--;
        pump();
      });
    }
  }

  return {
    /** Items waiting for a write (not those in one under way). */
    waiting: () => pending.length,
    /** Settles once `item` is written, with whatever else was waiting. */
    write(item: T): Promise<R> {
      return new Promise<R>((resolve, reject) => {
        pending.push({ item, resolve, reject });
        pump();
      });
    },
  };
}
