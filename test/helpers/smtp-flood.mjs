// A separate process that sends one huge DATA stream to an SMTP server, generated as it goes (never
// stored), as a remote attacker would: argv = port, recipient, total bytes. Prints the final reply.
import { Buffer } from 'node:buffer';
import { connect } from 'node:net';
import process from 'node:process';

const print = (line) => process.stdout.write(`${line}\n`);

const [port, rcpt, total] = [Number(process.argv[2]), process.argv[3], Number(process.argv[4])];
const socket = connect(port, '127.0.0.1');
let buffer = '';
const replies = [];
let wake = () => undefined;
socket.on('data', (d) => {
  buffer += d.toString('latin1');
  let i;
  while ((i = buffer.indexOf('\n')) >= 0) {
    const line = buffer.slice(0, i).replace(/\r$/, '');
    buffer = buffer.slice(i + 1);
    if (/^\d{3} /.test(line)) replies.push(line);
  }
  wake();
});
socket.on('error', (err) => {
  print(`ERROR ${err.message}`);
  process.exit(1);
});
const reply = async () => {
  while (!replies.length)
    await new Promise((r) => {
      wake = r;
    });
  return replies.shift();
};
const send = async (line) => {
  socket.write(`${line}\r\n`);
  return reply();
};
const write = (data) => new Promise((r) => (socket.write(data) ? r() : socket.once('drain', r)));

await reply();
await send('EHLO flood.example');
await send('MAIL FROM:<flood@far.example>');
await send(`RCPT TO:<${rcpt}>`);
const data = await send('DATA');
if (!data.startsWith('354')) {
  print(data);
  process.exit(0);
}
const line = `${'x'.repeat(76)}\r\n`;
const chunk = Buffer.from(line.repeat(Math.floor((1024 * 1024) / line.length)));
await write('Subject: flood\r\n\r\n');
for (let sent = 0; sent < total; sent += chunk.length) await write(chunk);
await write('\r\n.\r\n');
print(await reply());
socket.end();
