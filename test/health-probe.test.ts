import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { watchHealth } from './helpers/health-probe.js';

/**
 * The abuse tests' health probe runs in another process: a stall of the event loop that serves health
 * (here, this process's) shows as a slow sample. A probe inside this process would wait with the loop
 * and then time a fast answer, which is what the in-process probe did before.
 */
let server: Server;
/** Health requests the server has answered: the probe's progress, waited on instead of a fixed time. */
let hits = 0;
const answered = async (n: number) => {
  while (hits < n) await new Promise((r) => setImmediate(r));
};
let base: string;
beforeAll(async () => {
  server = createServer((req, res) => {
    if (req.url === '/api/health') hits += 1;
    res.writeHead(req.url === '/api/health' ? 200 : 404).end('{"ok":true}');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise((r) => server.close(r)));

describe('the out-of-process health probe', () => {
  it('sees a 1.5 s stall of the serving loop as one sample of about 1.5 s', async () => {
    const health = await watchHealth(base, 20);
    // Let a few probes answer, then block this process's loop as a super-linear regex would.
    await answered(hits + 3);
    const blockedUntil = performance.now() + 1500;
    while (performance.now() < blockedUntil) {
      /* the service's loop is frozen */
    }
    // The probe that waited through the stall, and two after it.
    await answered(hits + 3);
    const samples = await health.stop();
    expect(samples.length).toBeGreaterThan(3);
    expect(samples.every((s) => s.status === 200)).toBe(true);
    expect(Math.max(...samples.map((s) => s.ms))).toBeGreaterThan(1000);
  });

  it('counts a service that never answers as the probe timeout', async () => {
    const silent = createServer(() => undefined); // accepts, never answers
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
    const health = await watchHealth(url, 20, 300);
    const samples = await health.stop();
    silent.closeAllConnections();
    expect(samples[0]).toMatchObject({ status: 0, error: 'timeout' });
    expect(samples[0]!.ms).toBeGreaterThanOrEqual(290);
    await new Promise((r) => silent.close(r));
  });
});
