/**
 * The cost model of a benchmark phase (issue: per-message cost): CPU milliseconds per message for each
 * process (from /proc/<pid>/stat before and after), SQL statements per message (counted by each role
 * through SVC_QUERY_STATS_FILE), and Temporal server calls per message (from the histories of the runs).
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import type { Client } from '@temporalio/client';

const TICK_MS = 10; // CLK_TCK = 100 on Linux

/** utime + stime from a /proc stat file, in ms; 0 once its process or thread is gone. */
function statCpuMs(path: string): number {
  try {
    const stat = readFileSync(path, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) * TICK_MS;
  } catch {
    return 0;
  }
}

/** utime + stime of one process, in ms; 0 once it is gone. */
export const cpuMsOf = (pid: number): number => statCpuMs(`/proc/${pid}/stat`);

/** utime + stime of a process's main thread (its event loop, for Node), in ms; 0 once it is gone. */
export const mainThreadCpuMsOf = (pid: number): number => statCpuMs(`/proc/${pid}/task/${pid}/stat`);

/** Every process whose command name is `comm` (PostgreSQL backends: `postgres`; the Temporal dev server: `temporal`). */
export function pidsByComm(comm: string): number[] {
  return readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .map(Number)
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === comm;
      } catch {
        return false;
      }
    });
}

export type ProcessGroup = { name: string; pids: () => number[] };
export type CpuSnapshot = Map<string, Map<number, number>>;

/** CPU of every process of every group now (per pid, so processes that come and go are counted fairly). */
export function snapshotCpu(groups: ProcessGroup[]): CpuSnapshot {
  return new Map(groups.map((g) => [g.name, new Map(g.pids().map((pid) => [pid, cpuMsOf(pid)]))]));
}

/** CPU ms spent per group between two snapshots. */
export function cpuBetween(before: CpuSnapshot, after: CpuSnapshot): Map<string, number> {
  const out = new Map<string, number>();
  for (const [name, pids] of after) {
    let ms = 0;
    for (const [pid, t] of pids) ms += t - (before.get(name)?.get(pid) ?? 0);
    out.set(name, ms);
  }
  return out;
}

type QueryStats = { queries: number; byStatement?: Record<string, number> };

/** A role's stats file; the role rewrites it every half second, so a read that lands mid-write is read again. */
function readStats(f: string): QueryStats {
  for (let tries = 1; ; tries++) {
    try {
      return JSON.parse(readFileSync(f, 'utf8')) as QueryStats;
    } catch (err) {
      if (tries >= 20) throw err;
    }
  }
}

/** Statements counted by the roles that write SVC_QUERY_STATS_FILE (db/index.ts). */
export function queriesIn(files: string[]): number {
  return files.reduce((n, f) => n + (existsSync(f) ? readStats(f).queries : 0), 0);
}

/** Statements by their first words, summed over the roles' files (BENCH_STATEMENTS=1 prints them per message). */
export function statementsIn(files: string[]): Map<string, number> {
  const out = new Map<string, number>();
  for (const f of files.filter((x) => existsSync(x))) {
    const { byStatement = {} } = readStats(f);
    for (const [head, n] of Object.entries(byStatement)) out.set(head, (out.get(head) ?? 0) + n);
  }
  return out;
}

/** The statements of a phase per message, most frequent first, when BENCH_STATEMENTS=1. */
export function printStatements(before: Map<string, number>, after: Map<string, number>, n: number): void {
  if (process.env.BENCH_STATEMENTS !== '1') return;
  const rows = [...after]
    .map(([head, count]) => [head, (count - (before.get(head) ?? 0)) / n] as const)
    .filter(([, per]) => per > 0)
    .sort((a, b) => b[1] - a[1]);
  for (const [head, per] of rows) console.log(`  ${per.toFixed(2).padStart(6)}  ${head}`);
}

/**
 * Temporal server calls made for the runs of `types` on a task queue: each start and signal is one
 * call; each workflow task and each (ordinary) activity task is two (poll and respond). Local
 * activities ride on workflow tasks and cost none.
 */
export async function temporalCalls(
  client: Client,
  taskQueue: string,
  types: string[],
): Promise<{ calls: number; workflows: number }> {
  let calls = 0;
  let workflows = 0;
  const query = `TaskQueue = '${taskQueue}' AND WorkflowType IN (${types.map((t) => `'${t}'`).join(', ')})`;
  for await (const w of client.workflow.list({ query })) {
    workflows += 1;
    const history = await client.workflow.getHandle(w.workflowId, w.runId).fetchHistory();
    for (const e of history.events ?? []) {
      if (e.workflowExecutionStartedEventAttributes || e.workflowExecutionSignaledEventAttributes) calls += 1;
      if (
        e.workflowTaskCompletedEventAttributes ||
        e.activityTaskCompletedEventAttributes ||
        e.activityTaskFailedEventAttributes
      )
        calls += 2;
    }
  }
  return { calls, workflows };
}

/** Prints the cost table of one phase. */
export function printCost(
  label: string,
  n: number,
  cpu: Map<string, number>,
  sql: number,
  temporal: { calls: number; workflows: number },
): void {
  const total = [...cpu.values()].reduce((a, b) => a + b, 0);
  console.log(`cost per message, ${label} (${n} messages):`);
  for (const [name, ms] of cpu) console.log(`  CPU ${name.padEnd(18)} ${(ms / n).toFixed(2)} ms`);
  console.log(`  CPU ${'total'.padEnd(18)} ${(total / n).toFixed(2)} ms`);
  console.log(`  SQL statements          ${(sql / n).toFixed(2)}`);
  console.log(`  Temporal calls          ${(temporal.calls / n).toFixed(2)} (${temporal.workflows} workflow runs)`);
}
