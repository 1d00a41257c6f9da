import { connect as netConnect, type Socket } from 'node:net';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';

export type SubmissionReply = { code: number; text: string };

/**
 * A bare client for the submission server, for abuse tests: it says exactly what the test tells it (a
 * well-behaved client such as nodemailer would refuse to pipeline hundreds of commands or to AUTH in
 * clear). It can upgrade its socket in place (STARTTLS) or start in TLS (the implicit-TLS port), and can
 * connect from another loopback address (`from: '127.0.0.2'`), so a test's per-address state (the
 * connection cap, the login guard) is its own. The server's certificate is smtp-server's self-signed
 * development one: it is not verified.
 */
export async function submissionClient(
  port: number,
  opts: { from?: string; implicitTls?: boolean; waitGreeting?: boolean } = {},
) {
  const replies: SubmissionReply[] = [];
  const waiters: (() => void)[] = [];
  let pending = '';
  let partial: string[] = [];
  let closed = false;
  const wake = () => waiters.splice(0).forEach((w) => w());

  /** Splits what arrived into lines; a line `NNN text` ends a reply, `NNN-text` continues it. */
  function onData(chunk: Buffer) {
    pending += chunk.toString('latin1');
    for (let nl = pending.indexOf('\n'); nl >= 0; nl = pending.indexOf('\n')) {
      const line = pending.slice(0, nl).replace(/\r$/, '');
      pending = pending.slice(nl + 1);
      const code = Number(line.slice(0, 3));
      if (!Number.isInteger(code) || code < 100) continue;
      partial.push(line.slice(4));
      if (line[3] !== '-') {
        replies.push({ code, text: partial.join('\n') });
        partial = [];
      }
    }
    wake();
  }

  let socket: Socket | TLSSocket = netConnect({ port, host: '127.0.0.1', localAddress: opts.from });
  const watch = (s: Socket) => {
    s.on('data', onData);
    s.on('close', () => {
      closed = true;
      wake();
    });
    s.on('error', () => undefined);
  };
  /** Moves the connection into TLS: the handshake on the same socket, read from then on through TLS. */
  async function upgrade(): Promise<void> {
    const plain = socket as Socket;
    plain.off('data', onData);
    const secure = tlsConnect({ socket: plain, rejectUnauthorized: false });
    socket = secure;
    secure.on('data', onData);
    secure.on('error', () => undefined);
    secure.on('close', () => {
      closed = true;
      wake();
    });
    await new Promise<void>((resolve, reject) => {
      secure.once('secureConnect', () => resolve());
      secure.once('error', reject);
    });
  }
  watch(socket);
  socket.setNoDelay(true);
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', () => resolve());
    socket.once('error', reject);
  });
  if (opts.implicitTls) await upgrade();

  /** The next complete reply (throws if the connection closes first or none comes in time). */
  async function reply(timeoutMs = 30_000): Promise<SubmissionReply> {
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

  /** Waits until the server has closed the connection. */
  async function untilClosed(timeoutMs = 30_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!closed) {
      if (Date.now() > deadline) throw new Error('the server did not close the connection in time');
      await new Promise<void>((r) => {
        waiters.push(r);
        setTimeout(r, 200);
      });
    }
  }

  const client = {
    get socket() {
      return socket;
    },
    get closed() {
      return closed;
    },
    /** Replies already received and not yet read. */
    get buffered() {
      return replies.length;
    },
    reply,
    untilClosed,
    /** Writes a command line and waits for its reply. */
    async command(line: string): Promise<SubmissionReply> {
      socket.write(`${line}\r\n`);
      return reply();
    },
    /** Writes bytes, honouring backpressure (resolves early if the connection closes). */
    async write(data: Buffer | string): Promise<void> {
      if (closed) return;
      if (!socket.write(data))
        await new Promise<void>((r) => {
          const done = () => {
            socket.off('drain', done);
            socket.off('close', done);
            r();
          };
          socket.once('drain', done);
          socket.once('close', done);
        });
    },
    /** STARTTLS, then the TLS handshake on the same connection (EHLO must be said again afterwards). */
    async startTls(): Promise<SubmissionReply> {
      const answer = await client.command('STARTTLS');
      if (answer.code !== 220) return answer;
      await upgrade();
      return answer;
    },
    /** AUTH PLAIN with the initial response (RFC 4954): any user name, the secret as the password. */
    authPlain(secret: string, user = 'app'): Promise<SubmissionReply> {
      return client.command(`AUTH PLAIN ${Buffer.from(`\0${user}\0${secret}`).toString('base64')}`);
    },
    close: () => socket.destroy(),
  };
  if (opts.waitGreeting !== false) {
    const greeting = await reply();
    if (greeting.code !== 220) throw new Error(`greeting ${greeting.code} ${greeting.text}`);
  }
  return client;
}
export type SubmissionClient = Awaited<ReturnType<typeof submissionClient>>;

/**
 * A client on the STARTTLS port that is ready to send: greeted, EHLO, STARTTLS, EHLO again, and (with a
 * secret) AUTH PLAIN answered 235.
 */
export async function authedSubmission(port: number, secret?: string, opts: { from?: string } = {}) {
  const c = await submissionClient(port, opts);
  try {
    await expectCode(c.command('EHLO app.example'), 250);
    await expectCode(c.startTls(), 220);
    await expectCode(c.command('EHLO app.example'), 250);
    if (secret !== undefined) await expectCode(c.authPlain(secret), 235);
    return c;
  } catch (err) {
    c.close();
    throw err;
  }
}

async function expectCode(answer: Promise<SubmissionReply>, code: number): Promise<void> {
  const r = await answer;
  if (r.code !== code) throw new Error(`expected ${code}, got ${r.code} ${r.text}`);
}
