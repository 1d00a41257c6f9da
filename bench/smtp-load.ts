/**
 * bench:inbound's SMTP load generator in a process of its own: a pooled nodemailer transport sends the
 * benchmark's messages to the ingress, so the ingress's CPU figure holds the ingress only (until issue 35's
 * sixth round the generator shared its process and event loop). Started by bench/inbound.ts with BENCH_LOAD
 * (JSON) in its environment; prints `START` as its first message goes and `LOAD {"secs":…,"cpuMs":…}` when the
 * last is accepted.
 */
import nodemailer from 'nodemailer';
import { pool } from './util.js';

type LoadInput = { port: number; n: number; c: number; offset: number; tag: string };

const input = JSON.parse(process.env.BENCH_LOAD ?? '{}') as LoadInput;
const smtp = nodemailer.createTransport({
  host: '127.0.0.1',
  port: input.port,
  pool: true,
  maxConnections: input.c,
  maxMessages: Infinity,
  secure: false,
  ignoreTLS: true,
});
const message = (i: number) => ({
  from: `Sender ${i} <s${i}@far.example>`,
  to: `in${i}@inbox.bench.svc.test`,
  subject: `${input.tag} ${i}`,
  text: `Hello ${i}`,
  html: `<p>Hello <b>${i}</b></p>`,
});
console.log('START');
const cpu0 = process.cpuUsage();
const t0 = performance.now();
await pool(input.n, input.c, (i) => smtp.sendMail(message(input.offset + i)));
const secs = (performance.now() - t0) / 1000;
const cpu = process.cpuUsage(cpu0);
smtp.close();
console.log(`LOAD ${JSON.stringify({ secs, cpuMs: (cpu.user + cpu.system) / 1000 })}`);
