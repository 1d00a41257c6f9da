import { SMTPServer } from 'smtp-server';

/**
 * A loopback MX for shaping tests, bound to its own address: it counts connections (open now, the most
 * ever open at once, when each opened), the copies each recipient received, and can answer
 * `421 4.7.28` to every recipient once it has accepted `acceptFirst` messages, for `refuseForMs`, then
 * recover (a rate-limited Gmail, in short).
 */
export async function startShapingMx(opts: { host: string; port: number; acceptFirst?: number; refuseForMs?: number }) {
  let open = 0;
  let maxOpen = 0;
  const connectedAt: number[] = [];
  const copies = new Map<string, number>();
  let accepted = 0;
  let refusingSince: number | undefined;
  let refusals = 0;
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['AUTH', 'STARTTLS'],
    logger: false,
    socketTimeout: 60_000,
    onConnect(_session, cb) {
      open += 1;
      maxOpen = Math.max(maxOpen, open);
      connectedAt.push(Date.now());
      cb();
    },
    onClose() {
      open -= 1;
    },
    onRcptTo(_address, _session, cb) {
      if (opts.acceptFirst !== undefined && accepted >= opts.acceptFirst) {
        refusingSince ??= Date.now();
        if (Date.now() - refusingSince < (opts.refuseForMs ?? 0)) {
          refusals += 1;
          return cb(
            Object.assign(
              new Error('4.7.28 Our system has detected an unusual rate of unsolicited mail. Rate limited.'),
              { responseCode: 421 },
            ),
          );
        }
      }
      cb();
    },
    onData(stream, session, cb) {
      stream.on('data', () => undefined);
      stream.on('end', () => {
        accepted += 1;
        for (const r of session.envelope.rcptTo)
          copies.set(r.address.toLowerCase(), (copies.get(r.address.toLowerCase()) ?? 0) + 1);
        cb();
      });
    },
  });
  server.on('error', () => undefined);
  await new Promise<void>((resolve, reject) => {
    server.server.once('error', reject);
    server.listen(opts.port, opts.host, () => resolve());
  });
  return {
    copies,
    connectedAt,
    get open() {
      return open;
    },
    get maxOpen() {
      return maxOpen;
    },
    get refusals() {
      return refusals;
    },
    total: () => [...copies.values()].reduce((a, b) => a + b, 0),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
