/**
 * The benchmark's webhook receiver as its own process (the customer's server is not the service's
 * event loop): counts POSTs whose body is an `email.received` event, answers 200, and tells the count
 * on GET /count. Prints `listening <port>` once it listens.
 */
import { createServer } from 'node:http';

let count = 0;
const server = createServer((req, res) => {
  if (req.method === 'GET' && req.url === '/count') {
    res.end(String(count));
    return;
  }
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    try {
      if ((JSON.parse(Buffer.concat(chunks).toString('utf8')) as { type?: string }).type === 'email.received')
        count += 1;
    } catch {
      // not an event: not counted
    }
    res.end('ok');
  });
});
server.listen(0, '127.0.0.1', () => console.log(`listening ${(server.address() as { port: number }).port}`));
process.on('SIGTERM', () => server.close(() => process.exit(0)));
