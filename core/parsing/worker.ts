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

export type Refusal = {
  status: number;
  code: string;
  message: string;
  retryable: boolean;
  details?: Record<string, unknown>;
};
export type WorkerAnswer = { ok: true; value: unknown } | { ok: false; refusal: Refusal };

const tooBig = (task: string, err: RangeError): Refusal => ({
  status: 422,
  code: 'parse_memory_exceeded',
  message: `The input needs more than processing allows (${task}: ${err.message})`,
  retryable: false,
  details: { task },
});

type One = { task: TaskName; input: unknown; handedAt: number; started: Int32Array };
/** Several small tasks handed over in one message (batch.ts); `started` has two slots per task: its start and its end. */
type Batch = { batch: { task: TaskName; input: unknown }[]; handedAt: number; started: Int32Array };
/** A batch's answer for a task that threw something other than a refusal (a single task's would reject). */
export type BatchAnswer = WorkerAnswer | { ok: false; crash: string };

/** Milliseconds since hand-in, plus one (0 is "not yet"): the pool's budget of a task runs from its start. */
const mark = (started: Int32Array, slot: number, handedAt: number) =>
  Atomics.store(started, slot, Math.max(1, Date.now() - handedAt + 1));

async function answer(name: TaskName, input: unknown): Promise<WorkerAnswer> {
  const task = tasks[name] as ((input: unknown) => Promise<unknown>) | undefined;
  if (!task) throw new Error(`unknown parse task ${String(name)}`);
  try {
    return { ok: true, value: await task(input) };
  } catch (err) {
    // A string or stack past V8's limits (a merge that multiplies a value, markup nested too deep): the input's doing.
    if (err instanceof RangeError) return { ok: false, refusal: tooBig(name, err) };
    if (!isAppError(err)) throw err;
    return {
      ok: false,
      refusal: {
        status: err.status,
        code: err.code,
        message: err.message,
        retryable: err.retryable,
        details: err.details,
      },
    };
  }
}

export default async function run(message: One | Batch): Promise<WorkerAnswer | BatchAnswer[]> {
  if (!('batch' in message)) {
    mark(message.started, 0, message.handedAt);
    return answer(message.task, message.input);
  }
  const out: BatchAnswer[] = [];
  for (const [i, item] of message.batch.entries()) {
    mark(message.started, 2 * i, message.handedAt);
    out.push(
      await answer(item.task, item.input).catch((err: unknown) => ({
        ok: false as const,
        crash: err instanceof Error ? err.message : String(err),
      })),
    );
    mark(message.started, 2 * i + 1, message.handedAt);
  }
  return out;
}
