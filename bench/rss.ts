/**
 * Resident memory of the service's processes sampled through a benchmark run (issue: memory flat through
 * a 1,000,000-recipient broadcast): VmRSS from /proc/<pid>/status every `everyMs`.
 */
import { readdirSync, readFileSync } from 'node:fs';
import type { ProcessGroup } from './cost.js';

/** VmRSS of one process in MiB; 0 once it is gone. */
export function rssMibOf(pid: number): number {
  try {
    const m = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : 0;
  } catch {
    return 0;
  }
}

export type RssSample = { atS: number; delivered: number; mib: Record<string, number> };

/** Samples every group's summed RSS until stopped; `progress()` is recorded beside each sample. */
export function sampleRss(groups: ProcessGroup[], progress: () => number, everyMs = 5_000) {
  const samples: RssSample[] = [];
  const t0 = performance.now();
  const take = () =>
    samples.push({
      atS: Math.round((performance.now() - t0) / 100) / 10,
      delivered: progress(),
      mib: Object.fromEntries(
        groups.map((g) => [g.name, Math.round(g.pids().reduce((n, pid) => n + rssMibOf(pid), 0))]),
      ),
    });
  take();
  const timer = setInterval(take, everyMs);
  return {
    samples,
    stop() {
      clearInterval(timer);
      take();
      return samples;
    },
    /** Min, max and last of each group, and the first sample after the first 10% of the run (past warm-up). */
    summary() {
      const out: Record<string, { min: number; max: number; first: number; last: number; afterWarmup: number }> = {};
      const warm = samples.find((s) => s.atS >= (samples.at(-1)?.atS ?? 0) * 0.1) ?? samples[0]!;
      for (const g of groups) {
        const v = samples.map((s) => s.mib[g.name] ?? 0);
        out[g.name] = {
          min: Math.min(...v),
          max: Math.max(...v),
          first: v[0] ?? 0,
          last: v.at(-1) ?? 0,
          afterWarmup: warm.mib[g.name] ?? 0,
        };
      }
      return out;
    },
  };
}

/** Processes named `comm` among the descendants of `root` (the Temporal dev server this benchmark started, not another's). */
export function descendantsByComm(root: number, comm: string): number[] {
  const parent = new Map<number, number>();
  const names = new Map<number, string>();
  for (const d of readdirSync('/proc').filter((x) => /^\d+$/.test(x))) {
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      names.set(Number(d), stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')));
      parent.set(Number(d), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {
      // gone
    }
  }
  const under = (pid: number): boolean => {
    for (let p = parent.get(pid); p !== undefined && p > 1; p = parent.get(p)) if (p === root) return true;
    return false;
  };
  return [...names].filter(([pid, name]) => name === comm && under(pid)).map(([pid]) => pid);
}
