import { SMTPServer } from 'smtp-server';

/** `peer`: the address the client connected from; `ehlo`: the name it announced (egress sources, docs/egress.md). */
export type Received = { from: string; to: string[]; raw: Buffer; peer: string; ehlo: string };
type Reply = { code: number; message: string } | undefined;

/**
 * A real SMTP server on loopback acting as the recipient's MX. `onRcpt` may answer an error reply
 * (4xx or 5xx) for an address; everything accepted lands in `received`.
 */
export async function startSmtpSink(
  opts: {
    /** `peer` is the client's address (a source bound to 127.0.0.2, say). */
    onRcpt?: (address: string, peer: string) => Reply;
    /** Each DATA is answered this late (a slow MX keeps sends in flight). */ delayMs?: number;
  } = {},
) {
  const received: Received[] = [];
  const waiters: (() => void)[] = [];
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['AUTH', 'STARTTLS'],
    logger: false,
    size: 40 * 1024 * 1024,
    onRcptTo(address, session, cb) {
      const reply = opts.onRcpt?.(address.address, session.remoteAddress);
      if (reply) return cb(Object.assign(new Error(reply.message), { responseCode: reply.code }));
      cb();
    },
    onData(stream, session, cb) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        // Counted when it is answered 250, as an MX takes responsibility for a message.
        const accept = () => {
          received.push({
            from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
            to: session.envelope.rcptTo.map((r) => r.address),
            raw: Buffer.concat(chunks),
            peer: session.remoteAddress,
            ehlo: session.hostNameAppearsAs,
          });
          waiters.splice(0).forEach((w) => w());
          cb();
        };
        if (opts.delayMs) setTimeout(accept, opts.delayMs);
        else accept();
      });
    },
  });
  server.on('error', () => undefined); // a client going away mid-transaction is not a test failure
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.server.address() as { port: number }).port;
  return {
    port,
    received,
    /** Resolves with the first received message matching `pred` (waits for it). */
    async waitFor(pred: (r: Received) => boolean, timeoutMs = 20_000): Promise<Received> {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const hit = received.find(pred);
        if (hit) return hit;
        if (Date.now() > deadline)
          throw new Error(`no matching message within ${timeoutMs} ms (${received.length} received)`);
        await new Promise<void>((r) => {
          waiters.push(r);
          setTimeout(r, 200);
        });
      }
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
