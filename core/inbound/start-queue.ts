/**
 * Starts inbound delivery workflows after the message is durable, off the SMTP path (issue: per-message
 * cost): the 250 waits for the commit, not for Temporal. At most `concurrency` starts are in flight;
 * a start that fails (or a crash before it) is left to the sweep, which starts every stored message whose
 * workflow never marked it (`workflow_id` still null).
 */
export type InboundStart = { messageId: string; userId: string; domainId?: string };
export type InboundStartQueue = { enqueue(s: InboundStart): void; drain(): Promise<void> };

export function createInboundStartQueue(opts: { start: (s: InboundStart) => Promise<void>; concurrency?: number; onError?: (err: unknown, s: InboundStart) => void }): InboundStartQueue {
  const limit = opts.concurrency ?? 16;
  const pending: InboundStart[] = [];
  let running = 0;
  let idle: (() => void)[] = [];

  function pump(): void {
    while (running < limit && pending.length > 0) {
      const s = pending.shift()!;
      running += 1;
      opts.start(s).catch((err) => opts.onError?.(err, s)).finally(() => {
        running -= 1;
        if (pending.length > 0) pump();
        else if (running === 0) idle.splice(0).forEach((fn) => fn());
      });
    }
  }

  return {
    enqueue(s) {
      pending.push(s);
      pump();
    },
    async drain() {
      if (running === 0 && pending.length === 0) return;
      await new Promise<void>((resolve) => idle.push(resolve));
      idle = [];
    },
  };
}
