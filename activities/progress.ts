import { Context } from '@temporalio/activity';
import type { Progress } from '../core/mail/progress.js';

/** Heartbeat interval while an item is in flight, well inside the workflows' 30 s heartbeat timeout. */
const BEAT_EVERY_MS = 5_000;

/**
 * The activity's heartbeat as core sees it: `beat()` after each item, a timer beating while one long
 * item (a slow SMTP server) is in flight, and `stopped()` once the server has cancelled the attempt.
 */
export async function withProgress<T>(work: (progress: Progress) => Promise<T>): Promise<T> {
  const ctx = Context.current();
  let done = 0;
  let last = 0;
  const timer = setInterval(() => ctx.heartbeat({ done }), BEAT_EVERY_MS);
  // A heartbeat per item, at most one a second: a batch of 100 fast messages is not 100 calls into the SDK.
  const beat = () => {
    done += 1;
    const now = Date.now();
    if (now - last < 1_000) return;
    last = now;
    ctx.heartbeat({ done });
  };
  try {
    return await work({ beat, stopped: () => ctx.cancellationSignal.aborted });
  } finally {
    clearInterval(timer);
  }
}
