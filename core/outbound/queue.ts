/**
 * Group commit for immediate sends (DESIGN.md, The Temporal budget): accepted message ids are collected
 * and handed to `startBatch` once per flush, every `flushMs` or `maxBatch` ids, whichever comes first.
 * A failed start leaves the rows `queued`; the outbound sweep schedule picks them up.
 */
export type OutboundQueue = { enqueue(ids: string[]): void; flush(): Promise<void>; close(): Promise<void> };

export function createOutboundQueue(opts: {
  startBatch: (ids: string[]) => Promise<void>;
  flushMs?: number;
  maxBatch?: number;
  onError?: (err: unknown, ids: string[]) => void;
}): OutboundQueue {
  const flushMs = opts.flushMs ?? 5;
  const maxBatch = opts.maxBatch ?? 100;
  let pending: string[] = [];
  let timer: NodeJS.Timeout | undefined;
  const inFlight = new Set<Promise<void>>();

  function drain(): void {
    if (timer) clearTimeout(timer);
    timer = undefined;
    while (pending.length > 0) {
      const ids = pending.slice(0, maxBatch);
      pending = pending.slice(maxBatch);
      const p = opts.startBatch(ids).catch((err) => opts.onError?.(err, ids));
      inFlight.add(p);
      void p.finally(() => inFlight.delete(p));
    }
  }

  return {
    enqueue(ids) {
      pending.push(...ids);
      if (pending.length >= maxBatch) drain();
      else if (!timer) timer = setTimeout(drain, flushMs);
    },
    async flush() {
      drain();
      await Promise.all([...inFlight]);
    },
    async close() {
      await this.flush();
    },
  };
}
