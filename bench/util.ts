import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DEFAULT_SHAPING_FILE } from '../core/config.js';

/** Runs `task(i)` for i in [0, n) with at most `concurrency` in flight. */
export async function pool(n: number, concurrency: number, task: (i: number) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, n) }, async () => {
      while (next < n) await task(next++);
    }),
  );
}

export const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;

/** The middle value (the mean of the two middle ones for an even count). */
export function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** A run's headline figures by name, in the order they are printed. */
export type Figures = Record<string, number>;

const fmt = (v: number) => v.toFixed(Math.abs(v) >= 100 ? 1 : 2);

/**
 * Runs a benchmark BENCH_REPEAT times (default 1), each on a stack of its own, then hands `check` the figures
 * its floors and targets are judged on: the one run's, or with more than one run each figure's median, printed
 * with its min–max. Alternating with another commit is the operator's (docs/benchmarks.md).
 */
export async function repeatRuns(run: () => Promise<Figures>, check: (figures: Figures) => void): Promise<void> {
  const n = Math.max(1, Math.floor(Number(process.env.BENCH_REPEAT || 1)));
  const runs: Figures[] = [];
  for (let i = 1; i <= n; i++) {
    if (n > 1) console.log(`\n--- run ${i} of ${n} ---`);
    runs.push(await run());
  }
  if (n === 1) return check(runs[0]!);
  const medians: Figures = {};
  console.log(`\nmedian of ${n} runs (min–max):`);
  for (const name of Object.keys(runs[0]!)) {
    const values = runs.map((r) => r[name]!);
    medians[name] = median(values);
    const range = `${fmt(Math.min(...values))}–${fmt(Math.max(...values))}`;
    console.log(`  ${name.padEnd(34)} ${fmt(medians[name])} (${range})`);
  }
  check(medians);
}

/**
 * Runs a benchmark's helper script (`bench/<file>`) as a process of its own with `input` as JSON in `envName`,
 * and answers the JSON of its `<marker> …` line once it exits. `onLine` sees each line it prints as it comes.
 */
export async function runScript<T>(
  file: string,
  envName: string,
  input: Record<string, unknown>,
  marker: string,
  onLine?: (line: string) => void,
): Promise<T> {
  const { spawn } = await import('node:child_process');
  const child = spawn(process.execPath, ['--import', 'tsx', file], {
    env: { ...process.env, [envName]: JSON.stringify(input) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  stopRolesWithThisProcess();
  roles.add(child);
  child.once('exit', () => roles.delete(child));
  let out = '';
  let seen = 0;
  child.stdout.on('data', (b: Buffer) => {
    out += b.toString();
    for (let nl = out.indexOf('\n', seen); nl !== -1; nl = out.indexOf('\n', seen)) {
      onLine?.(out.slice(seen, nl));
      seen = nl + 1;
    }
  });
  child.stderr.on('data', (b: Buffer) => (out += b.toString()));
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  const line = out.split('\n').find((l) => l.startsWith(`${marker} `));
  if (code !== 0 || !line) throw new Error(`${file} failed (${code}):\n${out}`);
  return JSON.parse(line.slice(marker.length + 1)) as T;
}

/**
 * The worker as its own process (`npm run start:worker`), as production runs it: the API and the
 * worker then each get an event loop instead of sharing one. Resolves once it polls its task queue.
 */
export const spawnWorker = (env: Record<string, string>) => spawnRole(['main.ts', 'worker'], env, '[worker] polling');

const OUTPUT_TAIL = 64 * 1024;

/** The roles this process started and has not seen exit. */
const roles = new Set<{ kill(signal: NodeJS.Signals): boolean }>();
let watching = false;
/**
 * The roles go when the benchmark goes: at its exit, and when it is interrupted (SIGINT, SIGTERM). Without
 * this an interrupted run left its API and worker running, and they took CPU from the next run.
 */
function stopRolesWithThisProcess(): void {
  if (watching) return;
  watching = true;
  const stopAll = () => {
    for (const r of roles) r.kill('SIGTERM');
  };
  process.once('exit', stopAll);
  for (const signal of ['SIGINT', 'SIGTERM'] as const)
    process.once(signal, () => {
      stopAll();
      process.exit(signal === 'SIGINT' ? 130 : 143);
    });
}

/** One role as its own process (`tsx main.ts api`, `tsx main.ts worker`); resolves once it prints `ready`. */
export async function spawnRole(
  args: string[],
  env: Record<string, string>,
  ready: string,
): Promise<{ pid: number; readonly output: string; stop(): Promise<void> }> {
  const { spawn } = await import('node:child_process');
  // BENCH_CPU_PROF=<dir>: each role writes a V8 CPU profile there when it stops (open it in Chrome DevTools).
  const prof = process.env.BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`] : [];
  const child = spawn(process.execPath, [...prof, '--import', 'tsx', ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  stopRolesWithThisProcess();
  roles.add(child);
  child.once('exit', () => roles.delete(child));
  // What the role printed up to its ready line, then only its last OUTPUT_TAIL characters: a role logs a line
  // per message, and keeping (and searching) all of it cost this process a core over a long run.
  let head = '';
  let tail = '';
  let isReady = false;
  await new Promise<void>((resolve, reject) => {
    const onData = (b: Buffer) => {
      if (isReady) {
        tail = (tail + b.toString()).slice(-OUTPUT_TAIL);
        return;
      }
      // Only the new text and the marker's length before it can complete the marker.
      const from = Math.max(0, head.length - ready.length);
      head += b.toString();
      if (head.indexOf(ready, from) >= 0) {
        isReady = true;
        resolve();
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`${args.join(' ')} exited (${code}):\n${head}${tail}`)));
  });
  return {
    pid: child.pid!,
    /** What the role printed up to its ready line, and the last of what it printed since. */
    get output() {
      return head + tail;
    },
    stop: () =>
      new Promise<void>((resolve) => {
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

/**
 * POSTs JSON over kept-alive node:http connections: the load generator shares the two cores with the
 * service, and fetch (undici) costs it several times what node:http does per request.
 */
export async function jsonPoster(baseUrl: string, token: string) {
  const http = await import('node:http');
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  const url = new URL(baseUrl);
  return (path: string, body: unknown) =>
    new Promise<{ status: number; body: any }>((resolve, reject) => {
      const data = JSON.stringify(body);
      const req = http.request(
        {
          host: url.hostname,
          port: url.port,
          path,
          method: 'POST',
          agent,
          headers: {
            'content-type': 'application/json',
            'content-length': Buffer.byteLength(data),
            authorization: `Bearer ${token}`,
          },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            try {
              resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) });
            } catch {
              resolve({ status: res.statusCode ?? 0, body: text });
            }
          });
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.end(data);
    });
}

/**
 * A shaping file for the benchmarks' loopback sink (its site is `rcpt.test`'s MX): the shipped file, with the
 * sink's site on the reference transport's terms. The shipped default opens at most 100 connections a minute
 * to one site, 100 messages each, so a single site takes at most about 167 messages/s however fast the
 * platform is; the reference (a nodemailer pool: 5 connections, 100 messages each) has no such limit. The
 * sink keeps the default connection limit and messages per connection, without the connection rate.
 */
export function sinkShapingFile(dir: string): string {
  const file = join(dir, 'shaping.toml');
  const shipped = readFileSync(DEFAULT_SHAPING_FILE, 'utf8');
  writeFileSync(
    file,
    `${shipped}\n# The benchmark's sink (bench/util.ts).\n["rcpt.test"]\nmax_connection_rate = "100/s"\n`,
  );
  return file;
}
