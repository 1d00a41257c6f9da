import type { Piscina } from 'piscina';
import type { AppError } from '../errors.js';
import type { BatchAnswer, WorkerAnswer } from './worker.js';

/** Most tasks handed to a thread in one message. */
const MAX_BATCH = 16;

type Item = {
  task: string;
  input: unknown;
  budget: number;
  queueMs: number;
  resolve(answer: WorkerAnswer): void;
  reject(err: unknown): void;
};

/**
 * Small parse tasks that arrive together (one turn of the event loop: SMTP connections delivering at
 * once) are handed to a thread in one message, which runs them one after the other. Handing a task to a
 * thread costs more CPU than parsing a small mail (a wake-up and a message each way), and this pays it once
 * per batch. Each task keeps its own budget, counted from its own start (two slots per task in `started`):
 * the task past it is refused and its thread ended, and the tasks of the batch that lost their answer with
 * the thread run again alone, as they do when a thread dies of its memory limit.
 */
export function createBatcher(deps: {
  piscina: Piscina;
  /** The pool's path for one task: its own budget watch, its refusals. */
  alone(task: string, input: unknown, budget: number, queueMs: number): Promise<WorkerAnswer>;
  overBudget(task: string, ms: number): AppError;
  busy(task: string, ms: number): AppError;
  /** A task of a batch was refused for its budget (the metric). */
  counted(task: string): void;
}) {
  let pending: Item[] = [];
  let scheduled = false;

  const pass = (it: Item) => {
    deps.alone(it.task, it.input, it.budget, it.queueMs).then(it.resolve, it.reject);
  };

  function flush() {
    scheduled = false;
    // Tasks with the same budget and wait go together (the batch is watched by one timer).
    const byLimits = new Map<string, Item[]>();
    for (const it of pending)
      byLimits.set(`${it.budget}:${it.queueMs}`, [...(byLimits.get(`${it.budget}:${it.queueMs}`) ?? []), it]);
    pending = [];
    for (const all of byLimits.values()) {
      // Spread over the threads: a turn's tasks never all wait on one thread while another is idle.
      const size = Math.min(MAX_BATCH, Math.ceil(all.length / Math.max(1, deps.piscina.options.maxThreads)));
      for (let i = 0; i < all.length; i += size) {
        const group = all.slice(i, i + size);
        if (group.length === 1) pass(group[0]!);
        else void runBatch(group);
      }
    }
  }

  async function runBatch(group: Item[]) {
    const { budget, queueMs, task } = group[0]!;
    const handedAt = Date.now();
    const started = new Int32Array(new SharedArrayBuffer(8 * group.length));
    const controller = new AbortController();
    let culprit = -1;
    let refusal: AppError | undefined;
    const check = () => {
      const now = Date.now();
      let next = budget;
      let anyStarted = false;
      for (let i = 0; i < group.length; i++) {
        const at = Atomics.load(started, 2 * i);
        if (at === 0) continue;
        anyStarted = true;
        if (Atomics.load(started, 2 * i + 1) !== 0) continue;
        const ran = now - (handedAt + at - 1);
        if (ran >= budget) {
          [culprit, refusal] = [i, deps.overBudget(group[i]!.task, budget)];
          return controller.abort(refusal);
        }
        next = budget - ran;
        break;
      }
      if (!anyStarted) {
        if (now - handedAt >= queueMs) {
          refusal = deps.busy(task, queueMs);
          return controller.abort(refusal);
        }
        next = Math.min(budget, handedAt + queueMs - now);
      }
      timer = setTimeout(check, Math.max(1, next)).unref();
    };
    let timer = setTimeout(check, Math.min(budget, queueMs)).unref();
    try {
      const answers = (await deps.piscina.run(
        { batch: group.map((it) => ({ task: it.task, input: it.input })), handedAt, started },
        { signal: controller.signal },
      )) as BatchAnswer[];
      answers.forEach((a, i) => ('crash' in a ? group[i]!.reject(new Error(a.crash)) : group[i]!.resolve(a)));
    } catch (err) {
      // No thread took the batch in time: every task of it is refused as busy, as each alone would be.
      if (refusal && culprit < 0) return group.forEach((it) => it.reject(refusal));
      group.forEach((it, i) => {
        if (i !== culprit) return pass(it);
        deps.counted(it.task);
        it.reject(refusal ?? err);
      });
    } finally {
      clearTimeout(timer);
    }
  }

  return {
    /** Queues a task for the next batch (handed over after this turn of the event loop). */
    add(task: string, input: unknown, budget: number, queueMs: number): Promise<WorkerAnswer> {
      return new Promise((resolve, reject) => {
        pending.push({ task, input, budget, queueMs, resolve, reject });
        if (!scheduled) {
          scheduled = true;
          setImmediate(flush);
        }
      });
    },
  };
}
