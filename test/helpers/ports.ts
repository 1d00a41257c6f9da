import { createServer } from 'node:net';

// Below Linux's ephemeral range (32768-60999): a port handed out here is never taken meanwhile by an
// outgoing connection of the busy test run, only (rarely) by another free-port pick, which is why it is random.
const LOW = 20_000;
const HIGH = 32_000;
const given = new Set<number>();

function tryListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

/** A TCP port free on loopback right now (for servers that need their port before they start). */
export async function freePort(): Promise<number> {
  for (let i = 0; i < 200; i++) {
    const port = LOW + Math.floor(Math.random() * (HIGH - LOW));
    if (given.has(port)) continue;
    if (await tryListen(port)) {
      given.add(port);
      return port;
    }
  }
  throw new Error(`no free port found in ${LOW}-${HIGH}`);
}
