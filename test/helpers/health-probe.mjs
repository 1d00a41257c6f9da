// A separate process that times GET <url>/api/health over and over, as a monitor outside the service
// would: a probe inside the service's own process waits with it when its event loop stalls, and then
// sees nothing. argv = base URL, pause between probes (ms), per-probe timeout (ms).
// Prints `ready` after the first answer, then, when stdin ends, one JSON line: the samples taken.
import { get } from 'node:http';
import { performance } from 'node:perf_hooks';
import process from 'node:process';
import { setTimeout } from 'node:timers';

const [base, everyMs, timeoutMs] = [process.argv[2], Number(process.argv[3] ?? 50), Number(process.argv[4] ?? 10_000)];
const samples = [];
let running = true;
process.stdin.on('data', () => undefined);
process.stdin.on('end', () => {
  running = false;
});
process.stdin.resume();

/** One GET on a fresh connection (no keep-alive: each probe goes through accept, as a monitor's would). */
function probeOnce() {
  const started = performance.now();
  return new Promise((resolve) => {
    const done = (status, error) => resolve({ ms: performance.now() - started, status, ...(error ? { error } : {}) });
    const req = get(`${base}/api/health`, { agent: false, timeout: timeoutMs }, (res) => {
      res.on('data', () => undefined);
      res.on('end', () => done(res.statusCode ?? 0));
      res.on('error', (err) => done(0, err.message));
    });
    // A probe that got no answer counts as its whole wait: a hung service shows as the timeout.
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (err) => done(0, err.message));
  });
}

samples.push(await probeOnce());
process.stdout.write('ready\n');
while (running) {
  await new Promise((r) => setTimeout(r, everyMs));
  samples.push(await probeOnce());
}
process.stdout.write(`${JSON.stringify(samples)}\n`);
