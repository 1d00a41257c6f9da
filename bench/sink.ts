import { SMTPServer } from 'smtp-server';

/** An SMTP sink that only counts delivered messages (the benchmark's recipient MX). */
export async function startCountingSink() {
  let count = 0;
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['AUTH', 'STARTTLS'],
    logger: false,
    maxClients: 1000,
    onData(stream, _s, cb) {
      stream.on('data', () => undefined);
      stream.on('end', () => {
        count += 1;
        cb();
      });
    },
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.server.address() as { port: number }).port,
    reset: () => void (count = 0),
    get count() {
      return count;
    },
    async waitForCount(n: number, timeoutMs: number) {
      const deadline = Date.now() + timeoutMs;
      while (count < n) {
        if (Date.now() > deadline) throw new Error(`only ${count}/${n} delivered within ${timeoutMs} ms`);
        await new Promise((r) => setTimeout(r, 20));
      }
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
