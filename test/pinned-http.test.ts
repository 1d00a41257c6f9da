import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { requestPinned } from '../core/net/pinned-http.js';

/** A loopback HTTP server that counts TCP connections; `handle` answers each request. */
async function serve(handle: (n: number, socket: Socket, res: ServerResponse) => void) {
  let connections = 0;
  let requests = 0;
  const server: Server = createServer((req, res) => {
    req.resume();
    req.on('end', () => handle(++requests, req.socket, res));
  });
  server.on('connection', () => {
    connections += 1;
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    server,
    url: new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`),
    connections: () => connections,
  };
}

const post = (url: URL) =>
  requestPinned(
    url,
    { address: '127.0.0.1', family: 4 },
    {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
      timeoutMs: 5_000,
      maxResponseBytes: 1024,
    },
  );

let open: Server[] = [];
afterEach(async () => {
  await Promise.all(
    open.map(
      (s) =>
        new Promise((r) => {
          s.closeAllConnections();
          s.close(r);
        }),
    ),
  );
  open = [];
});

describe('pinned HTTP requests (webhook POSTs)', () => {
  it('keeps the connection: POSTs one after another to one endpoint share a socket', async () => {
    const s = await serve((_n, _socket, res) => res.end('ok'));
    open.push(s.server);
    for (let i = 0; i < 5; i++) expect((await post(s.url)).status).toBe(200);
    expect(s.connections()).toBe(1);
  });

  it('a kept socket the server closed is not a failed POST: the request goes again on a new connection', async () => {
    // The second request arrives on the kept socket and the server drops it without an answer (as a
    // server whose keep-alive timeout just ran out does); the client sends it again on a fresh socket.
    const s = await serve((n, socket, res) => (n === 2 ? socket.destroy() : res.end(`answer ${n}`)));
    open.push(s.server);
    expect((await post(s.url)).text).toBe('answer 1');
    const second = await post(s.url);
    expect(second).toMatchObject({ status: 200, text: 'answer 3' });
    expect(s.connections()).toBe(2);
  });

  it('a fresh connection the server drops is a failure, not a retry loop', async () => {
    const s = await serve((_n, socket) => socket.destroy());
    open.push(s.server);
    await expect(post(new URL(`${s.url.origin}/other`))).rejects.toThrow();
    expect(s.connections()).toBe(1);
  });
});
