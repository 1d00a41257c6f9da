import type { ParsedMail } from 'mailparser';
import { Piscina } from 'piscina';
import { AppError } from '../errors.js';
import { log } from '../log.js';
import { parseTaskDuration, parseTasksOverBudget, parseThreadErrors } from '../metrics.js';
import type { TaskInput, TaskName, TaskOutput } from './tasks.js';
import type { WorkerAnswer } from './worker.js';
import { PARSE_DEFAULTS, type ParsePoolOptions } from './options.js';
import { parseWorkerFile } from './worker-file.js';
import { createBatcher } from './batch.js';

export { PARSE_DEFAULTS, type ParsePoolOptions } from './options.js';

/**
 * The parse pool (DESIGN.md, Untrusted input): worker threads that run every parser of outside bytes, so
 * the event loop that answers health, HTTP, SMTP and IMAP never waits on one. Each task has a time budget,
 * counted from when a thread starts it (`watchTask`); a task past it is aborted, which terminates the thread running it
 * (a spinning parser is not left behind; piscina starts a fresh one), and the caller gets a refusal:
 * AppError 422 `parse_budget_exceeded`. A thread that passes its memory limit ends the same way with
 * `parse_memory_exceeded`. Both are counted in svc_parse_tasks_over_budget_total.
 */
/** Per call: the budget (default PARSE_TIMEOUT_MS) and the longest wait for a thread (default 3 budgets, at least 30 s). */
export type RunOptions = { timeoutMs?: number; queueMs?: number };
export type ParsePool = {
  run<K extends TaskName>(task: K, input: TaskInput<K>, opts?: RunOptions): Promise<TaskOutput<K>>;
  readonly options: ParsePoolOptions;
  close(): Promise<void>;
};

const overBudget = (task: string, ms: number) =>
  new AppError(
    422,
    'parse_budget_exceeded',
    `The input took longer than its ${ms} ms processing budget (${task}) and was refused`,
    false,
    { task },
  );
const overMemory = (task: string, mb: number) =>
  new AppError(
    422,
    'parse_memory_exceeded',
    `The input needed more than the ${mb} MB processing memory limit (${task}) and was refused`,
    false,
    { task },
  );

const busy = (task: string, ms: number) =>
  new AppError(503, 'parse_busy', `Every processing thread stayed busy for ${ms} ms (${task}); try again later`, true, {
    task,
  });

/**
 * The budget of one task, counted from when a thread starts it (the thread writes, into `started`, the
 * milliseconds from hand-in to its start, plus one): a task that waited behind a hostile one is not
 * refused for the wait. A task no thread starts within `queueMs` is refused as busy, retryable (503 `parse_busy`).
 */
function watchTask(task: string, budget: number, queueMs: number) {
  const handedAt = Date.now();
  const started = new Int32Array(new SharedArrayBuffer(4));
  const controller = new AbortController();
  const watch = {
    handedAt,
    started,
    signal: controller.signal,
    refusal: undefined as AppError | undefined,
    stop: () => clearTimeout(timer),
  };
  const end = (refusal: AppError) => {
    watch.refusal = refusal;
    controller.abort(refusal);
  };
  const check = () => {
    const at = Atomics.load(started, 0);
    const now = Date.now();
    if (at === 0) {
      if (now - handedAt >= queueMs) return end(busy(task, queueMs));
      timer = setTimeout(check, Math.min(budget, handedAt + queueMs - now)).unref(); // look again: started, or its wait is over
      return;
    }
    const ran = now - (handedAt + at - 1);
    if (ran >= budget) return end(overBudget(task, budget));
    timer = setTimeout(check, budget - ran).unref();
  };
  let timer = setTimeout(check, Math.min(budget, queueMs)).unref();
  return watch;
}

export function createParsePool(options: ParsePoolOptions): ParsePool {
  const piscina = new Piscina({
    filename: options.workerFile ?? parseWorkerFile(),
    minThreads: 1,
    maxThreads: Math.max(1, options.threads),
    idleTimeout: 30_000,
    resourceLimits: { maxOldGenerationSizeMb: options.memoryMb, maxYoungGenerationSizeMb: 32, stackSizeMb: 4 },
  });
  // A thread can fail with no task of its own: it reached its memory limit just as its over-budget task was
  // being ended, so the task was already refused. piscina then emits 'error' on the pool, and an 'error' with
  // no listener would end the process (every role parses: one hostile message must not take one down).
  piscina.on('error', (err: unknown) => {
    const code = (err as { code?: string }).code ?? 'unknown';
    parseThreadErrors.inc({ code });
    log.warn(
      { code, error: (err as Error).message },
      '[parse] a thread failed with no task of its own; it is replaced',
    );
  });
  let closed = false;

  /** One task handed to a thread alone, with its own budget watch; answers what the thread answered, or throws the refusal. */
  async function alone(task: string, input: unknown, budget: number, queueMs: number): Promise<WorkerAnswer> {
    const watch = watchTask(task, budget, queueMs);
    try {
      return await piscina.run(
        { task, input, handedAt: watch.handedAt, started: watch.started },
        { signal: watch.signal },
      );
    } catch (err) {
      if (watch.refusal) {
        if (watch.refusal.code === 'parse_budget_exceeded') parseTasksOverBudget.inc({ task, budget: 'time' });
        throw watch.refusal;
      }
      if ((err as { code?: string }).code === 'ERR_WORKER_OUT_OF_MEMORY') {
        parseTasksOverBudget.inc({ task, budget: 'memory' });
        throw overMemory(task, options.memoryMb);
      }
      throw err;
    } finally {
      watch.stop();
    }
  }
  const batcher = createBatcher({
    piscina,
    alone,
    overBudget,
    busy,
    counted: (task) => parseTasksOverBudget.inc({ task, budget: 'time' }),
  });

  async function run<K extends TaskName>(task: K, input: TaskInput<K>, opts: RunOptions = {}): Promise<TaskOutput<K>> {
    if (closed) throw new AppError(503, 'unavailable', 'The service is shutting down', true);
    const budget = opts.timeoutMs ?? options.timeoutMs;
    const queueMs = opts.queueMs ?? Math.max(3 * budget, 30_000);
    const startedAt = performance.now();
    // A small mail goes with the others of this turn (batch.ts); anything else alone.
    const batched = task === 'parseMail' && (input as Uint8Array).length <= BATCH_BYTES;
    let answer: WorkerAnswer;
    try {
      answer = await (batched ? batcher.add(task, input, budget, queueMs) : alone(task, input, budget, queueMs));
    } finally {
      parseTaskDuration.observe({ task }, (performance.now() - startedAt) / 1000);
    }
    if (answer.ok) return answer.value as TaskOutput<K>;
    const r = answer.refusal;
    if (r.code === 'parse_memory_exceeded') parseTasksOverBudget.inc({ task, budget: 'memory' });
    throw new AppError(r.status, r.code, r.message, r.retryable, r.details);
  }

  return {
    run,
    options,
    async close() {
      if (closed) return;
      closed = true;
      await piscina.close({ force: true });
    },
  };
}

/**
 * The process's pool. Threads are a process resource, and parsers are called from services and free
 * functions alike, so there is one pool per process: each core opens it (`openParsePool`) and closes its
 * hold on shutdown; the last hold closes the threads. Work handed in with no hold open (a test of a pure
 * function) gets a pool on demand, whose idle threads never keep the process alive.
 */
let shared: { pool: ParsePool; holds: number } | undefined;
let configured: ParsePoolOptions = PARSE_DEFAULTS;

export function openParsePool(options: ParsePoolOptions): { close(): Promise<void> } {
  configured = options;
  shared ??= { pool: createParsePool(options), holds: 0 };
  shared.holds += 1;
  let released = false;
  return {
    async close() {
      if (released || !shared) return;
      released = true;
      shared.holds -= 1;
      if (shared.holds > 0) return;
      const { pool } = shared;
      shared = undefined;
      await pool.close();
    },
  };
}

/** Runs `task` on the process's pool (see `createParsePool` for the budget and its refusal). */
export function runParse<K extends TaskName>(task: K, input: TaskInput<K>, opts?: RunOptions): Promise<TaskOutput<K>> {
  shared ??= { pool: createParsePool(configured), holds: 0 };
  return shared.pool.run(task, input, opts);
}

/** Outside bytes below this size may be handled on the calling loop when their parser is linear (see docs/configuration.md). */
export const INLINE_BYTES = 64 * 1024;
/** Mail up to this size is parsed in batches with the other small mail of the same turn (batch.ts). */
const BATCH_BYTES = 64 * 1024;

/** A Uint8Array that came back through structured clone, as the Buffer it was. */
export const toBuffer = (bytes: Uint8Array): Buffer => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);

/** Inbound mail parsed in the pool, with each attachment's content a Buffer again (structured clone answers Uint8Arrays). */
export async function parseMail(raw: Buffer): Promise<ParsedMail> {
  const mail = await runParse('parseMail', raw);
  for (const a of mail.attachments) a.content = toBuffer(a.content);
  return mail;
}
