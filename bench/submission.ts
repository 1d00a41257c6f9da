import nodemailer from 'nodemailer';
import type Mail from 'nodemailer/lib/mailer/index.js';
import { cpuBetween, queriesIn, snapshotCpu, type ProcessGroup } from './cost.js';
import type { startCountingSink } from './sink.js';
import { percentile } from './util.js';

export type SubmissionFigures = {
  /** Messages/s answered 250 over the open connections (the connections opened before the clock starts). */
  accepted: number;
  /** Messages/s from the phase's start to the last of them in the sink. */
  delivered: number;
  acceptSecs: number;
  deliveredSecs: number;
  /** Sorted latencies of the timed messages, MAIL FROM to the 250 after DATA, in ms. */
  latencies: number[];
  /** Mean of each connection's first message, sent one at a time: connect, STARTTLS, AUTH, then the message. */
  firstMs: number;
  /** Mean of a second message per connection, one at a time, on the open connection. */
  warmMs: number;
  /** CPU ms per group over the timed phase (to the last delivery). */
  cpu: Map<string, number>;
  /** SQL statements the roles counted over the timed phase (0 where they count none: the single process). */
  sql: number;
};

/**
 * (d) The same messages through SMTP submission: `c` pooled nodemailer transports of one connection each
 * (STARTTLS, AUTH PLAIN with the account key, the development certificate accepted), as an application
 * keeping a connection per sending thread would. Each connection is opened and logged into one at a time
 * before the clock starts (its first message and a second one on it are timed alone, so the cost of a
 * connection shows), then `n` messages go with `c` in flight, as the API phase sends them.
 */
export async function runSubmissionPhase(opts: {
  port: number;
  key: string;
  n: number;
  c: number;
  /** Message i, the API phase's message (offset so its recipients differ). */
  message: (i: number) => Mail.Options;
  sink: Awaited<ReturnType<typeof startCountingSink>>;
  groups: ProcessGroup[];
  /** The roles' SVC_QUERY_STATS_FILEs. */
  statsFiles: string[];
  timeoutMs: number;
}): Promise<SubmissionFigures> {
  const { n, c, sink } = opts;
  const transports = Array.from({ length: c }, () =>
    nodemailer.createTransport({
      host: '127.0.0.1',
      port: opts.port,
      secure: false,
      requireTLS: true,
      tls: { rejectUnauthorized: false },
      auth: { user: 'bench', pass: opts.key },
      pool: true,
      maxConnections: 1,
      maxMessages: Number.MAX_SAFE_INTEGER,
    }),
  );
  const sendOn = async (w: number, i: number) => {
    const info = await transports[w]!.sendMail(opts.message(i));
    if (!String(info.response).startsWith('250')) throw new Error(`submission ${i}: ${info.response}`);
  };
  try {
    // Warm-up, one connection at a time: its first message (connect, EHLO, STARTTLS, EHLO, AUTH, message),
    // then a second on the open connection. 2c messages, delivered and drained before the timed part.
    sink.reset();
    let first = 0;
    let warm = 0;
    for (let w = 0; w < c; w++) {
      const t = performance.now();
      await sendOn(w, w);
      first += performance.now() - t;
    }
    for (let w = 0; w < c; w++) {
      const t = performance.now();
      await sendOn(w, c + w);
      warm += performance.now() - t;
    }
    await sink.waitForCount(2 * c, opts.timeoutMs);

    sink.reset();
    const latencies: number[] = [];
    await new Promise((r) => setTimeout(r, 1000)); // the roles write their counts at most once a second
    const cpuBefore = snapshotCpu(opts.groups);
    const sqlBefore = queriesIn(opts.statsFiles);
    const start = performance.now();
    let next = 0;
    await Promise.all(
      transports.map(async (_, w) => {
        while (next < n) {
          const i = next++;
          const t = performance.now();
          await sendOn(w, 2 * c + i);
          latencies.push(performance.now() - t);
        }
      }),
    );
    const acceptSecs = (performance.now() - start) / 1000;
    await sink.waitForCount(n, opts.timeoutMs);
    const deliveredSecs = (performance.now() - start) / 1000;
    await new Promise((r) => setTimeout(r, 1000)); // their last counts
    const cpu = cpuBetween(cpuBefore, snapshotCpu(opts.groups));
    const sql = queriesIn(opts.statsFiles) - sqlBefore;
    latencies.sort((a, b) => a - b);
    return {
      accepted: n / acceptSecs,
      delivered: n / deliveredSecs,
      acceptSecs,
      deliveredSecs,
      latencies,
      firstMs: first / c,
      warmMs: warm / c,
      cpu,
      sql,
    };
  } finally {
    for (const t of transports) t.close();
  }
}

/** Prints (d) and the ratio to the API phase. */
export function printSubmission(f: SubmissionFigures, n: number, api: { accepted: number; delivered: number }): void {
  const l = f.latencies;
  console.log(
    `(d) submission accept: ${f.accepted.toFixed(0)}/s; latency p50 ${percentile(l, 50).toFixed(1)} ms, p95 ${percentile(l, 95).toFixed(1)} ms, p99 ${percentile(l, 99).toFixed(1)} ms`,
  );
  console.log(`(d) submission end to end: ${f.delivered.toFixed(1)} delivered/s (${f.deliveredSecs.toFixed(1)} s)`);
  console.log(
    `(d) per connection, alone: first message (connect, STARTTLS, AUTH, send) ${f.firstMs.toFixed(1)} ms; a message on the open connection ${f.warmMs.toFixed(1)} ms`,
  );
  console.log(
    `(d)/(a) accepted = ${(f.accepted / api.accepted).toFixed(2)}; (d)/(b) delivered = ${(f.delivered / api.delivered).toFixed(2)}`,
  );
  const total = [...f.cpu.values()].reduce((a, b) => a + b, 0);
  console.log(`cost per message, (d): submitted and delivered (${n} messages):`);
  for (const [name, ms] of f.cpu) console.log(`  CPU ${name.padEnd(18)} ${(ms / n).toFixed(2)} ms`);
  console.log(`  CPU ${'total'.padEnd(18)} ${(total / n).toFixed(2)} ms`);
  console.log(`  SQL statements          ${(f.sql / n).toFixed(2)}`);
}
