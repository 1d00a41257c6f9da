/**
 * The entry of a parse worker thread (bundled by worker-file.ts): runs the named task of tasks.ts. A
 * refusal the task throws (an AppError: a bad CSV, a send without content) crosses back as plain fields,
 * since structured clone keeps no class; pool.ts rebuilds it. Anything else is rethrown as it is.
 */
import { isAppError } from '../errors.js';
import { useLinearQuotedPrintable } from './quoted-printable.js';
import { tasks, type TaskName } from './tasks.js';

// mailparser's quoted-printable decoder is quadratic on a long run of blanks: this thread uses a linear one.
useLinearQuotedPrintable();

export type Refusal = { status: number; code: string; message: string; retryable: boolean; details?: Record<string, unknown> };
export type WorkerAnswer = { ok: true; value: unknown } | { ok: false; refusal: Refusal };

const tooBig = (task: string, err: RangeError): Refusal => ({
  status: 422, code: 'parse_memory_exceeded', message: `The input needs more than processing allows (${task}: ${err.message})`, retryable: false, details: { task },
});

export default async function run(message: { task: TaskName; input: unknown; handedAt: number; started: Int32Array }): Promise<WorkerAnswer> {
  const task = tasks[message.task] as ((input: unknown) => Promise<unknown>) | undefined;
  if (!task) throw new Error(`unknown parse task ${String(message.task)}`);
  // The pool's budget runs from here (pool.ts, watchTask): milliseconds since hand-in, plus one (0 is "not started").
  Atomics.store(message.started, 0, Math.max(1, Date.now() - message.handedAt + 1));
  try {
    return { ok: true, value: await task(message.input) };
  } catch (err) {
    // A string or stack past V8's limits (a merge that multiplies a value, markup nested too deep): the input's doing.
    if (err instanceof RangeError) return { ok: false, refusal: tooBig(message.task, err) };
    if (!isAppError(err)) throw err;
    return { ok: false, refusal: { status: err.status, code: err.code, message: err.message, retryable: err.retryable, details: err.details } };
  }
}
