import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { expect } from 'vitest';

export type HealthSample = { ms: number; status: number; error?: string };

/** What the abuse tests allow: health answers each probe, and the slowest answer within a second (issue 29). */
export const HEALTH_MAX_MS = 1000;

/**
 * Times GET /api/health from ANOTHER process (test/helpers/health-probe.mjs) every `everyMs` until
 * stopped. The service runs in the test's own process, so a probe there would wait with a stalled event
 * loop and then measure a fast answer; from outside, a stall of seconds is a sample of seconds.
 * Resolves once the first probe has answered, so the samples cover what the test does next.
 */
export async function watchHealth(baseUrl: string, everyMs = 50, timeoutMs = 10_000) {
  const child = spawn(
    process.execPath,
    [fileURLToPath(new URL('./health-probe.mjs', import.meta.url)), baseUrl, String(everyMs), String(timeoutMs)],
    { stdio: ['pipe', 'pipe', 'inherit'] },
  );
  let out = '';
  child.stdout.on('data', (d: Buffer) => {
    out += d.toString();
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  await new Promise<void>((resolve, reject) => {
    const check = () => {
      if (out.startsWith('ready\n')) resolve();
    };
    child.stdout.on('data', check);
    void exited.then((code) => reject(new Error(`health probe exited (${code}) before its first answer: ${out}`)));
  });
  return {
    /** Ends the probe after its current request; answers every sample (the first one included). */
    async stop(): Promise<HealthSample[]> {
      child.stdin.end();
      const code = await exited;
      if (code !== 0) throw new Error(`health probe exited ${code}: ${out}`);
      return JSON.parse(out.slice('ready\n'.length)) as HealthSample[];
    },
  };
}

/** One line for an assertion message: the probes, the slowest ones, and any that did not answer 200. */
export function describeHealth(samples: HealthSample[]): string {
  const ms = samples.map((s) => Math.round(s.ms));
  const slowest = [...ms].sort((a, b) => b - a).slice(0, 8);
  const median = [...ms].sort((a, b) => a - b)[Math.floor(ms.length / 2)] ?? 0;
  const bad = samples.filter((s) => s.status !== 200).map((s) => `${s.status || s.error}@${Math.round(s.ms)}ms`);
  return `health from another process: ${samples.length} probes, median ${median} ms, slowest ${slowest.join(',')} ms${bad.length ? `; not 200: ${bad.slice(0, 8).join(',')}` : ''}`;
}

/** Health answered every probe 200, the slowest under `maxMs`, with at least `minProbes` probes taken. */
export function expectHealthUp(samples: HealthSample[], opts: { maxMs?: number; minProbes?: number } = {}): void {
  const figures = describeHealth(samples);
  expect(samples.length, figures).toBeGreaterThanOrEqual(opts.minProbes ?? 2);
  expect(
    samples.filter((s) => s.status !== 200),
    figures,
  ).toEqual([]);
  expect(Math.max(...samples.map((s) => s.ms)), figures).toBeLessThan(opts.maxMs ?? HEALTH_MAX_MS);
}
