import { connect, type Socket } from 'node:net';

export type SmtpReply = { code: number; text: string };

/**
 * A bare SMTP client on a raw socket, for abuse tests: it says exactly what the test tells it, when it
 * is told (nodemailer would refuse to misbehave). `reply()` waits for the next complete reply.
 */
export async function rawSmtp(port: number, opts: { waitGreeting?: boolean } = {}) {
  const socket: Socket = connect(port, '127.0.0.1');
  socket.setNoDelay(true);
  let buffer = '';
  const replies: SmtpReply[] = [];
  const waiters: (() => void)[] = [];
  let closed = false;
  socket.on('data', (chunk: Buffer) => {
    buffer += chunk.toString('latin1');
    let m: RegExpExecArray | null;
    // A reply ends at a line `NNN text` (a space after the code; `NNN-` continues it).
    while ((m = /^((?:\d{3}-[^\n]*\n)*)(\d{3})(?: ([^\n]*))?\r?\n/.exec(buffer))) {
      replies.push({ code: Number(m[2]), text: `${m[1]}${m[3] ?? ''}` });
      buffer = buffer.slice(m[0].length);
    }
    waiters.splice(0).forEach((w) => w());
  });
  socket.on('close', () => {
    closed = true;
    waiters.splice(0).forEach((w) => w());
  });
  socket.on('error', () => undefined);
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', () => resolve());
    socket.once('error', reject);
  });

  async function reply(timeoutMs = 30_000): Promise<SmtpReply> {
    const deadline = Date.now() + timeoutMs;
    while (replies.length === 0) {
      if (closed) throw new Error('connection closed without a reply');
      if (Date.now() > deadline) throw new Error('no SMTP reply in time');
      await new Promise<void>((r) => {
        waiters.push(r);
        setTimeout(r, 200);
      });
    }
    return replies.shift()!;
  }

  const client = {
    socket,
    reply,
    get closed() {
      return closed;
    },
    /** Writes a command line and waits for its reply. */
    async command(line: string): Promise<SmtpReply> {
      socket.write(`${line}\r\n`);
      return reply();
    },
    /** Writes bytes, honouring backpressure. */
    async write(data: Buffer | string): Promise<void> {
      if (!socket.write(data)) await new Promise<void>((r) => socket.once('drain', () => r()));
    },
    close: () => socket.destroy(),
  };
  if (opts.waitGreeting !== false) {
    const greeting = await reply();
    if (greeting.code !== 220) throw new Error(`greeting ${greeting.code} ${greeting.text}`);
  }
  return client;
}
