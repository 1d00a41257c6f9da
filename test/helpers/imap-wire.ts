import { connect, type Socket } from 'node:net';

/** A bare IMAP connection for protocol-level tests: send raw bytes, wait for text to appear. */
export async function rawImap(port: number, opts: { localAddress?: string } = {}) {
  const socket: Socket = connect({ host: '127.0.0.1', port, ...opts });
  let text = '';
  let closed = false;
  socket.on('data', (b) => (text += b.toString('latin1')));
  socket.on('close', () => (closed = true));
  socket.on('error', () => undefined);
  await new Promise<void>((r) => socket.once('connect', () => r()));
  const until = async (pred: () => boolean, timeoutMs = 5000) => {
    const deadline = Date.now() + timeoutMs;
    while (!pred()) {
      if (Date.now() > deadline) throw new Error(`timed out; got:\n${text}`);
      await new Promise((r) => setTimeout(r, 10));
    }
  };
  await until(() => text.includes('\r\n'));
  return {
    socket,
    get text() {
      return text;
    },
    get closed() {
      return closed;
    },
    send: (data: string | Buffer) => socket.write(data),
    /** Sends a tagged command and answers its tagged completion line. */
    async cmd(tag: string, line: string, timeoutMs = 5000): Promise<string> {
      const start = text.length;
      socket.write(`${tag} ${line}\r\n`);
      const re = new RegExp(`(^|\\r\\n)${tag} (OK|NO|BAD)[^\\r]*\\r\\n`);
      await until(() => re.test(text.slice(start)), timeoutMs);
      return re.exec(text.slice(start))![0].trim();
    },
    until,
    close: () => socket.destroy(),
  };
}
