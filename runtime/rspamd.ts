import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { WATCHDOG } from '../temporal/dev-server.js';

/** Where the rspamd binary is installed (Debian's `rspamd` package: /usr/bin), or undefined. */
export function rspamdBinary(): string | undefined {
  return ['/usr/bin/rspamd', '/usr/sbin/rspamd', '/usr/local/bin/rspamd'].find((p) => existsSync(p));
}

/** A free loopback port (asked of the kernel, then released for rspamd to bind). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

/**
 * The smallest rspamd that scans: Debian's stock rules and scores (`$CONFDIR/common.conf`), one normal worker
 * on a loopback port, no controller, proxy or fuzzy worker, no redis (Bayes and the modules that need
 * redis stay off), logs on the console, state (hyperscan cache, pid) in `dir`. `nameserver` points rspamd's
 * DNS at one server (tests use their loopback DNS server).
 */
export function rspamdConfig(opts: { dir: string; port: number; nameserver?: string }): string {
  const dns = opts.nameserver ? `nameserver = ["${opts.nameserver}"]; ` : '';
  return `# Written by the service: a local rspamd for npm start and the tests (docs/spam-scoring.md).
.include "$CONFDIR/common.conf"
options {
  pidfile = "${opts.dir}/rspamd.pid";
  .include "$CONFDIR/options.inc"
  dns { ${dns}timeout = 1s; retransmits = 1; }
}
logging { type = "console"; level = "error"; }
worker "normal" {
  bind_socket = "127.0.0.1:${opts.port}";
  .include "$CONFDIR/worker-normal.inc"
  count = 1;
}
`;
}

export type LocalRspamd = { url: string; port: number; stop(): Promise<void> };

/**
 * Starts rspamd (`-f`, in the foreground of its watchdog) with `rspamdConfig` in `dir`, and resolves once
 * its worker answers `GET /ping`. As root it runs with `-i` (its workers would refuse to run privileged):
 * it listens on loopback only.
 */
export async function startLocalRspamd(opts: {
  dir: string;
  port?: number;
  nameserver?: string;
  binary?: string;
  startTimeoutMs?: number;
}): Promise<LocalRspamd> {
  const binary = opts.binary ?? rspamdBinary();
  if (!binary) throw new Error('rspamd is not installed (apt-get install rspamd)');
  mkdirSync(opts.dir, { recursive: true });
  const port = opts.port ?? (await freePort());
  const conf = join(opts.dir, 'rspamd.conf');
  writeFileSync(
    conf,
    rspamdConfig({ dir: opts.dir, port, ...(opts.nameserver ? { nameserver: opts.nameserver } : {}) }),
  );
  const args = ['-f', '-c', conf];
  for (const v of ['DBDIR', 'RUNDIR', 'LOGDIR', 'LOCAL_CONFDIR']) args.push('--var', `${v}=${opts.dir}`);
  if (process.getuid?.() === 0) args.push('-i');
  // Under the Temporal dev server's watchdog: rspamd stops within a second of this process dying.
  const child = spawn('bash', ['-c', WATCHDOG, 'rspamd-local', String(process.pid), binary, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output: string[] = [];
  const collect = (buf: Buffer) => {
    output.push(...buf.toString().split('\n').filter(Boolean));
    output.splice(0, Math.max(0, output.length - 30));
  };
  child.stdout?.on('data', collect);
  child.stderr?.on('data', collect);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
  };
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + (opts.startTimeoutMs ?? 60_000);
  let gone = false;
  void exited.then(() => (gone = true));
  for (;;) {
    if (await pong(url)) return { url, port, stop };
    if (gone) throw new Error(`rspamd exited during start:\n${output.join('\n')}`);
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`rspamd did not answer on ${url} in time:\n${output.join('\n')}`);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** Whether rspamd's worker at `url` answers its ping. */
export async function pong(url: string): Promise<boolean> {
  try {
    const res = await fetch(`${url}/ping`, { signal: AbortSignal.timeout(1000) });
    return res.ok && (await res.text()).trim() === 'pong';
  } catch {
    return false;
  }
}
