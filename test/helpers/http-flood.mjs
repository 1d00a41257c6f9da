// A separate process that opens `count` HTTP/1.1 connections at once and on each POSTs a body of `bytes`
// bytes, generated as it goes (never stored), reading the server's answer while it writes, as an attacker
// would. argv = port, path, content type, authorization ('-' for none), bytes, count. Prints one JSON line
// per connection: the status, the answer's body, and how many body bytes were written before the answer.
import { Buffer } from 'node:buffer';
import { connect } from 'node:net';
import process from 'node:process';

const [port, path, type, auth, bytes, count] = [
  Number(process.argv[2]),
  process.argv[3],
  process.argv[4],
  process.argv[5],
  Number(process.argv[6]),
  Number(process.argv[7]),
];
const filler = type.includes('json')
  ? Buffer.from('x'.repeat(64 * 1024))
  : Buffer.from(`${'a@b.example,'.repeat(5461)}\n`.slice(0, 64 * 1024));
const opening = type.includes('json') ? '{"html":"' : 'email,note\n';
const closing = type.includes('json') ? '"}' : '';

function attack() {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    let answer = Buffer.alloc(0);
    let written = 0;
    let done = false;
    const finish = (extra) => {
      if (done) return;
      done = true;
      const text = answer.toString('latin1');
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);
      const body = text.slice(text.indexOf('\r\n\r\n') + 4);
      socket.destroy();
      resolve({ status, body, written, ...extra });
    };
    socket.on('data', (d) => {
      answer = Buffer.concat([answer, d]);
      const text = answer.toString('latin1');
      const end = text.indexOf('\r\n\r\n');
      const length = Number(/\r\ncontent-length: (\d+)/i.exec(text)?.[1] ?? -1);
      if (end >= 0 && length >= 0 && answer.length >= end + 4 + length) finish();
    });
    socket.on('error', (err) => finish({ error: err.code ?? err.message }));
    socket.on('close', () => finish());
    socket.on('connect', async () => {
      const head = [
        `POST ${path} HTTP/1.1`,
        'Host: 127.0.0.1',
        `Content-Type: ${type}`,
        `Content-Length: ${bytes}`,
        ...(auth === '-' ? [] : [`Authorization: ${auth}`]),
      ];
      socket.write(`${head.join('\r\n')}\r\n\r\n${opening}`);
      written = opening.length;
      while (!done && written < bytes) {
        const left = bytes - written;
        // The body is well-formed to its end (valid JSON, when JSON), so only a server that parses it pays.
        const part =
          left <= filler.length
            ? Buffer.concat([filler.subarray(0, left - closing.length), Buffer.from(closing)])
            : filler;
        written += part.length;
        if (!socket.write(part))
          await new Promise((r) => {
            socket.once('drain', r);
            socket.once('close', r);
          });
      }
    });
  });
}

const results = await Promise.all(Array.from({ length: count }, attack));
for (const r of results) process.stdout.write(`${JSON.stringify(r)}\n`);
