/**
 * bench:send's reference (c) in a process of its own: a pooled, DKIM-signing nodemailer transport sends the
 * benchmark's messages to the sink, and this process reports its own CPU around the sends. The sink stays in
 * the benchmark's process, so the reference's CPU holds the transport and its signatures only, as the
 * platform's figure holds its roles only. Started by bench/send.ts with BENCH_REF (JSON) in its environment;
 * prints one line, `REF {"secs":…,"cpuMs":…}`.
 */
import nodemailer from 'nodemailer';
import { pool } from './util.js';
import { benchMessage } from './message.js';

type RefInput = {
  port: number;
  n: number;
  c: number;
  from: string;
  dkim: { domainName: string; keySelector: string; privateKey: string };
};

const input = JSON.parse(process.env.BENCH_REF ?? '{}') as RefInput;
const direct = nodemailer.createTransport({
  host: '127.0.0.1',
  port: input.port,
  pool: true,
  maxConnections: 5,
  secure: false,
  ignoreTLS: true,
  dkim: input.dkim,
});
const cpu0 = process.cpuUsage();
const t0 = performance.now();
await pool(input.n, input.c, (i) => direct.sendMail(benchMessage(input.from, i)));
const secs = (performance.now() - t0) / 1000;
const cpu = process.cpuUsage(cpu0);
direct.close();
console.log(`REF ${JSON.stringify({ secs, cpuMs: (cpu.user + cpu.system) / 1000 })}`);
