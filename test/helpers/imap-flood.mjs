// A separate process that attacks the IMAP server as the attacker did, so the service's event loop
// serves only the service. argv = port, attack, then the attack's arguments. Prints one JSON line: what the
// server answered (the tail of its text), whether it closed the connection, how many bytes were written.
//   continuation <bytes> [user pass]   every line ends in {0+}, one command growing (before login, or after)
//   append                              a pre-auth APPEND announcing a 30 MiB literal
//   connections <count> <localAddress>  opens count connections at once and holds them until answered
//   unread <bytes> [user pass]          pipelines CAPABILITY (before login, or after) and never reads the replies
//   commands <user> <pass> <line>...    logs in, SELECTs INBOX, runs each line as a tagged command
import { Buffer } from 'node:buffer';
import { connect } from 'node:net';
import process from 'node:process';
import { clearTimeout, setTimeout } from 'node:timers';

const [port, attack, ...rest] = [Number(process.argv[2]), process.argv[3], ...process.argv.slice(4)];

function open(opts = {}) {
  const socket = connect({ host: '127.0.0.1', port, ...opts });
  const c = { socket, text: '', closed: false, written: 0 };
  socket.on('data', (d) => {
    c.text = (c.text + d.toString('latin1')).slice(-20_000);
  });
  socket.on('close', () => {
    c.closed = true;
  });
  socket.on('error', () => undefined);
  return c;
}
const until = async (c, pred, ms = 20_000) => {
  const end = Date.now() + ms;
  while (!pred() && !c.closed && Date.now() < end) await new Promise((r) => setTimeout(r, 5));
  return pred();
};
/** Writes `chunk` until `bytes` are written or the server stops reading (no drain for a second) or closes. */
async function pour(c, chunk, bytes) {
  while (c.written < bytes && !c.closed) {
    c.written += chunk.length;
    if (!c.socket.write(chunk)) {
      const drained = await new Promise((r) => {
        const t = setTimeout(() => r(false), 1000);
        c.socket.once('drain', () => {
          clearTimeout(t);
          r(true);
        });
        c.socket.once('close', () => {
          clearTimeout(t);
          r(false);
        });
      });
      if (!drained) break;
    }
  }
}
const report = (c, extra = {}) => ({ text: c.text.slice(-2000), closed: c.closed, written: c.written, ...extra });
async function login(c, user, pass) {
  c.socket.write(`l1 LOGIN ${user} ${pass}\r\nl2 SELECT INBOX\r\n`);
  await until(c, () => /l2 (OK|NO|BAD)/.test(c.text));
}

let result;
if (attack === 'continuation') {
  const c = open();
  await until(c, () => c.text.includes('\r\n'));
  if (rest[1]) await login(c, rest[1], rest[2]);
  c.socket.write('f1 LOGIN {0+}\r\n');
  await pour(c, Buffer.from('x {0+}\r\n'.repeat(8192)), Number(rest[0]));
  await until(c, () => c.closed, 5000);
  result = report(c);
  c.socket.destroy();
} else if (attack === 'append') {
  const c = open();
  await until(c, () => c.text.includes('\r\n'));
  c.socket.write(`p1 APPEND INBOX {${30 * 1024 * 1024}}\r\n`);
  await until(c, () => /p1 (OK|NO|BAD)|\+ /.test(c.text));
  c.socket.write('p2 NOOP\r\n');
  await until(c, () => /p2 (OK|NO|BAD)/.test(c.text));
  result = report(c);
  c.socket.destroy();
} else if (attack === 'connections') {
  const all = Array.from({ length: Number(rest[0]) }, () => open({ localAddress: rest[1] }));
  await Promise.all(all.map((c) => until(c, () => c.text.includes('\r\n'))));
  result = {
    greeted: all.filter((c) => c.text.startsWith('* OK')).length,
    refused: all.filter((c) => c.text.startsWith('* BYE')).length,
    sample: all.at(-1).text,
  };
  for (const c of all) c.socket.destroy();
} else if (attack === 'unread') {
  const c = open();
  await until(c, () => c.text.includes('\r\n'));
  if (rest[1]) await login(c, rest[1], rest[2]);
  c.socket.pause();
  await pour(c, Buffer.from('u CAPABILITY\r\n'.repeat(4096)), Number(rest[0]));
  result = report(c);
  c.socket.destroy();
} else if (attack === 'commands') {
  const c = open();
  await until(c, () => c.text.includes('\r\n'));
  await login(c, rest[0], rest[1]);
  const answers = [];
  for (const [i, line] of rest.slice(2).entries()) {
    const done = new RegExp(`(?:^|\r\n)(k${i} (?:OK|NO|BAD)[^\r]*)`);
    c.socket.write(`k${i} ${line}\r\n`);
    await until(c, () => done.test(c.text), 60_000);
    answers.push(done.exec(c.text)?.[1] ?? '');
  }
  result = report(c, { answers });
  c.socket.destroy();
}
process.stdout.write(`${JSON.stringify(result)}\n`);
