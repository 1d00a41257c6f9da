import { SMTPServer } from 'smtp-server';

type Reply = { code: number; message: string } | undefined;

/**
 * An SMTP server standing in for one recipient domain's MX, bound to its own loopback address, that
 * counts the copies each recipient really received: a message counts only when its 250 reached a
 * client still connected (a transaction the client gave up on delivered nothing). It can stall the
 * first DATA it gets and refuse recipients (`onRcpt`, e.g. 451 on a first try, 550 always).
 */
export async function startFaultSink(opts: {
  host: string;
  port: number;
  stallFirstDataMs?: number;
  onRcpt?: (address: string, attempt: number) => Reply;
}) {
  const copies = new Map<string, number>();
  const rcptTries = new Map<string, number>();
  const closed = new Set<string>();
  let stalls = opts.stallFirstDataMs ? 1 : 0;
  let stalled = 0;
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['AUTH', 'STARTTLS'],
    logger: false,
    size: 40 * 1024 * 1024,
    socketTimeout: 300_000,
    onClose(session) {
      closed.add(session.id);
    },
    onRcptTo(address, _session, cb) {
      const a = address.address.toLowerCase();
      const n = (rcptTries.get(a) ?? 0) + 1;
      rcptTries.set(a, n);
      const reply = opts.onRcpt?.(a, n);
      if (reply) return cb(Object.assign(new Error(reply.message), { responseCode: reply.code }));
      cb();
    },
    onData(stream, session, cb) {
      stream.on('data', () => undefined);
      stream.on('end', async () => {
        if (stalls > 0) {
          stalls -= 1;
          stalled += 1;
          const until = Date.now() + opts.stallFirstDataMs!;
          while (Date.now() < until && !closed.has(session.id)) await new Promise((r) => setTimeout(r, 100));
        }
        if (closed.has(session.id)) return cb(new Error('client went away'));
        for (const r of session.envelope.rcptTo)
          copies.set(r.address.toLowerCase(), (copies.get(r.address.toLowerCase()) ?? 0) + 1);
        cb();
      });
    },
  });
  // A client killed mid-transaction (the worker process, SIGKILL) resets its connections: expected here.
  server.on('error', () => undefined);
  await new Promise<void>((resolve, reject) => {
    server.server.once('error', reject);
    server.listen(opts.port, opts.host, () => resolve());
  });
  return {
    copies,
    get stalled() {
      return stalled;
    },
    total: () => [...copies.values()].reduce((a, b) => a + b, 0),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
