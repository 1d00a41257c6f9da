import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { createConnection } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CLI_TYPE_NAMES, SEARCH_ATTRIBUTES } from './search-attributes.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');

/** The Temporal CLI built by scripts/ensure-temporal.sh, else `temporal` on PATH. */
export function temporalCliPath(): string {
  const local = join(ROOT, '.temporal', 'bin', 'temporal');
  return existsSync(local) ? local : 'temporal';
}

/** Dynamic config that lets one co-located dev server keep up with the worker (DESIGN.md, The Temporal budget). */
const DYNAMIC_CONFIG = [
  'frontend.rps=10000',
  'frontend.namespaceRPS=10000',
  'history.persistenceMaxQPS=10000',
  'frontend.persistenceMaxQPS=10000',
  'matching.persistenceMaxQPS=10000',
  'matching.numTaskqueueReadPartitions=1',
  'matching.numTaskqueueWritePartitions=1',
  // Lets a worker run an activity it just scheduled without a round trip through matching.
  'system.enableActivityEagerExecution=true',
];

/**
 * Runs the CLI under a small bash watchdog: SIGTERM to the watchdog stops the server cleanly, and if
 * this Node process dies without stopping it (SIGKILL, crash) the server is stopped within a second.
 * The local rspamd of `npm start` runs under the same one (runtime/rspamd.ts).
 */
export const WATCHDOG = `
parent=$1; shift
"$@" & child=$!
trap 'kill -TERM $child 2>/dev/null; wait $child; exit 0' TERM INT
while kill -0 "$parent" 2>/dev/null && kill -0 $child 2>/dev/null; do sleep 1; done
kill -TERM $child 2>/dev/null
wait $child`;

/**
 * What the service needs of any Temporal server, tuned or not: `SvcMessageId` holds every id of a batch
 * (100 ids are about 3.1 KB as a KeywordList), over the default 2 KB per search attribute value.
 */
export const REQUIRED_DYNAMIC_CONFIG = ['frontend.searchAttributesSizeOfValueLimit=4096'];

export type DevServer = { address: string; uiPort: number | undefined; stop(): Promise<void> };

/**
 * Starts `temporal server start-dev` as a child process and resolves once its frontend accepts
 * connections. `dbFile` undefined keeps state in memory (tests); the service passes a file in DATA_DIR.
 */
export async function startDevServer(opts: {
  port: number;
  uiPort?: number;
  namespace: string;
  dbFile?: string;
  log?: (line: string) => void;
  /** More `key=value` dynamic config (tests make continue-as-new come early). */
  dynamicConfig?: string[];
  /** Leave out this project's tuning (DYNAMIC_CONFIG): the benchmarks measure what it is worth. */
  untuned?: boolean;
}): Promise<DevServer> {
  if (await isListening(opts.port)) {
    throw new Error(
      `Port ${opts.port} is already in use: another Temporal server is running? Set TEMPORAL_ADDRESS=127.0.0.1:${opts.port} to use it, or TEMPORAL_DEV_PORT to pick another port.`,
    );
  }
  const args = [
    'server',
    'start-dev',
    '--ip',
    '127.0.0.1',
    '--port',
    String(opts.port),
    '--namespace',
    opts.namespace,
    '--log-level',
    'warn',
  ];
  if (opts.dbFile) {
    mkdirSync(dirname(opts.dbFile), { recursive: true });
    args.push('--db-filename', opts.dbFile);
  }
  if (opts.uiPort) args.push('--ui-port', String(opts.uiPort), '--ui-ip', '127.0.0.1');
  else args.push('--headless');
  for (const [name, type] of Object.entries(SEARCH_ATTRIBUTES))
    args.push('--search-attribute', `${name}=${CLI_TYPE_NAMES[type]}`);
  for (const kv of [...REQUIRED_DYNAMIC_CONFIG, ...(opts.untuned ? [] : DYNAMIC_CONFIG), ...(opts.dynamicConfig ?? [])])
    args.push('--dynamic-config-value', kv);

  const child = spawn('bash', ['-c', WATCHDOG, 'temporal-dev', String(process.pid), temporalCliPath(), ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output: string[] = [];
  const collect = (buf: Buffer) => {
    for (const line of buf.toString().split('\n').filter(Boolean)) {
      output.push(line);
      if (output.length > 50) output.shift();
      opts.log?.(line);
    }
  };
  child.stdout?.on('data', collect);
  child.stderr?.on('data', collect);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const spawnError = new Promise<Error>((resolve) => child.once('error', resolve));

  const deadline = Date.now() + 60_000;
  for (;;) {
    const raced = await Promise.race([
      isListening(opts.port).then((up) => (up ? 'up' : 'wait')),
      exited.then(() => 'exited' as const),
      spawnError.then((e) => e),
    ]);
    if (raced === 'up') break;
    if (raced instanceof Error)
      throw new Error(
        `Could not run the Temporal CLI (${temporalCliPath()}): ${raced.message}. Run "npm install" (it builds .temporal/bin/temporal) or put temporal on PATH.`,
      );
    if (raced === 'exited') throw new Error(`Temporal dev server exited during start:\n${output.join('\n')}`);
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`Temporal dev server did not listen on ${opts.port} within 60 s:\n${output.join('\n')}`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  return { address: `127.0.0.1:${opts.port}`, uiPort: opts.uiPort, stop: () => stopChild(child, exited) };
}

async function stopChild(child: ChildProcess, exited: Promise<number | null>): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}

export function isListening(port: number, host = '127.0.0.1'): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ port, host });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}
