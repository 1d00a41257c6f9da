/**
 * Group commit for immediate sends (DESIGN.md, The Temporal budget): accepted message ids are collected
 * and handed to `startBatch`, at most `maxBatch` ids per flush, one start per account in it (so each run
 * carries its account's search attribute). While `maxInFlight` flushes are still under way, new ids wait
 * and join the next one, so batches grow with load on their own: at low load every message starts at
 * once (after `flushMs`), under load one start carries up to 100 messages.
 * Starts are also paced: a partial batch needs one of `startsPerSecond` tokens (a bucket of `burst`), so
 * under a steady load a start carries about a second's worth of ids divided by that rate (each run costs
 * the Temporal server and the worker about 30 ms of CPU: DESIGN.md, The Temporal budget), while a quiet
 * service still starts each message at once. A full batch never waits for a token.
 * A failed start leaves the rows `queued`; the outbound sweep schedule picks them up.
 */
export type OutboundQueue = {
  enqueue(ids: string[], account?: string): void;
  flush(): Promise<void>;
  close(): Promise<void>;
};
type Item = { id: string; account: string };

export function createOutboundQueue(opts: {
  startBatch: (ids: string[], account: string) => Promise<void>;
  flushMs?: number;
  maxBatch?: number;
  maxInFlight?: number;
  startsPerSecond?: number;
  burst?: number;
  onError?: (err: unknown, ids: string[]) => void;
}): OutboundQueue {
  const flushMs = opts.flushMs ?? 25;
  const maxBatch = opts.maxBatch ?? 100;
  const maxInFlight = opts.maxInFlight ?? 1;
  let pending: Item[] = [];
  let timer: NodeJS.Timeout | undefined;
  const inFlight = new Set<Promise<void>>();
  let idle: (() => void)[] = [];
  const rate = opts.startsPerSecond ?? Infinity;
  const burst = opts.burst ?? 5;
  let tokens = burst;
  let refilledAt = Date.now();

  /** Takes a start token if one is there; otherwise answers how many ms until one is. */
  function takeToken(): number {
    if (rate === Infinity) return 0;
    const now = Date.now();
    tokens = Math.min(burst, tokens + ((now - refilledAt) / 1000) * rate);
    refilledAt = now;
    if (tokens >= 1) {
      tokens -= 1;
      return 0;
    }
    return Math.ceil(((1 - tokens) / rate) * 1000);
  }

  /** One flush: the items grouped by account, one start each, in the order they came. */
  function startAll(items: Item[]): Promise<void> {
    const byAccount = new Map<string, string[]>();
    for (const it of items) byAccount.set(it.account, [...(byAccount.get(it.account) ?? []), it.id]);
    return Promise.all(
      [...byAccount].map(([account, ids]) => opts.startBatch(ids, account).catch((err) => opts.onError?.(err, ids))),
    ).then(() => undefined);
  }

  function pump(force = false): void {
    if (timer) clearTimeout(timer);
    timer = undefined;
    while (pending.length > 0 && (inFlight.size < maxInFlight || force)) {
      const wait = takeToken();
      if (wait > 0 && pending.length < maxBatch && !force) {
        timer = setTimeout(() => pump(), wait);
        return;
      }
      const items = pending.slice(0, maxBatch);
      pending = pending.slice(maxBatch);
      const p: Promise<void> = startAll(items).finally(() => {
        inFlight.delete(p);
        // A full batch goes at once; a partial one waits out the window, so under load batches fill up.
        if (pending.length >= maxBatch) pump();
        else if (pending.length > 0) timer ??= setTimeout(() => pump(), flushMs);
        else if (inFlight.size === 0) idle.splice(0).forEach((fn) => fn());
      });
      inFlight.add(p);
    }
  }

  return {
    enqueue(ids, account = '') {
      pending.push(...ids.map((id) => ({ id, account })));
      if (pending.length >= maxBatch && inFlight.size < maxInFlight) pump();
      else if (!timer && inFlight.size < maxInFlight) timer = setTimeout(() => pump(), flushMs);
    },
    async flush() {
      pump(true);
      if (inFlight.size > 0) await new Promise<void>((resolve) => idle.push(resolve));
    },
    async close() {
      await this.flush();
      idle = [];
    },
  };
}
