import { Context } from '@temporalio/activity';
import type { Progress } from '../core/sending/delivery.js';

/** Heartbeat interval while an item is in flight, well inside the workflows' 30 s heartbeat timeout. */
const BEAT_EVERY_MS = 5_000;

/**
 * The activity's heartbeat as core sees it: `beat()` after each item, a timer beating while one long
 * item (a slow SMTP server) is in flight, and `stopped()` once the server has cancelled the attempt.
 */
export async function withProgress<T>(work: (progress: Progress) => Promise<T>): Promise<T> {
  const ctx = Context.current();
  let done = 0;
  const timer = setInterval(() => ctx.heartbeat({ done }), BEAT_EVERY_MS);
  try {
    return await work({ beat: () => ctx.heartbeat({ done: ++done }), stopped: () => ctx.cancellationSignal.aborted });
  } finally {
    clearInterval(timer);
  }
}
