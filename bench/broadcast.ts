/**
 * npm run bench:broadcast — broadcast fan-out throughput on this machine: PostgreSQL, the Temporal dev
 * server, API and worker as their own processes (BENCH_SPLIT=0: one process), OUTBOUND_MODE=mx to a
 * loopback SMTP sink found through a loopback DNS server. Measures (a) a broadcast to a list of
 * BENCH_RECIPIENTS contacts from `send` to the last message in the sink, and (b) the same number of
 * messages DKIM-signed and sent by a pooled nodemailer transport straight to the sink, the ceiling;
 * prints recipients/s, (a)/(b), and the time 100,000 recipients would take at the measured rate
 * (extrapolated, not measured). Goal: at least 170 recipients/s (100,000 in under 10 minutes).
 * Through (a) it samples the resident memory (RSS) of the API, the worker, the Temporal server and
 * PostgreSQL every BENCH_RSS_EVERY_MS, and writes the figures (rates, duration, RSS samples) to
 * BENCH_FIGURES_FILE (default .data/bench/broadcast-<recipients>-<time>.json).
 *   BENCH_RECIPIENTS (default 10000; `1000000` is the million), BENCH_CEILING (messages of (b),
 *   default min(recipients, 20000): the ceiling is a rate), BENCH_CONCURRENCY (ceiling, default 32),
 *   BENCH_TIMEOUT_MS (default 5 ms per recipient, at least 15 minutes), BROADCAST_* (see README),
 *   BENCH_TEMPORAL_MEMORY=1 (the dev server without its database file, as the tests run it),
 *   BENCH_API_CONTACTS (contacts added through the API, default 10,000; the rest of the audience by SQL),
 *   TEST_PG_URL, TEMPORAL_ADDRESS.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { eq, sql } from 'drizzle-orm';
import nodemailer from 'nodemailer';
import { loadConfig } from '../core/config.js';
import { schema } from '../db/index.js';
import { startService } from '../runtime/service.js';
import { startDevServer } from '../temporal/dev-server.js';
import { startTestDns } from '../test/helpers/dns.js';
import { createTestDatabase } from '../test/helpers/pg.js';
import { freePort } from '../test/helpers/ports.js';
import { apiClient } from '../test/helpers/stack.js';
import {} from '../worker.js';
import { pidsByComm } from './cost.js';
import { descendantsByComm, sampleRss } from './rss.js';
import { startCountingSink } from './sink.js';
import { pool, sinkShapingFile, spawnRole, spawnWorker } from './util.js';

const N = Number(process.env.BENCH_RECIPIENTS ?? 10_000);
const CEILING_N = Math.min(N, Number(process.env.BENCH_CEILING ?? 20_000));
const C = Number(process.env.BENCH_CONCURRENCY ?? 32);
/** Contacts added through the API; the rest of the audience is written by SQL (see below). */
const API_ADDED = Number(process.env.BENCH_API_CONTACTS ?? 10_000);
const TIMEOUT_MS = Number(process.env.BENCH_TIMEOUT_MS ?? Math.max(900_000, N * 5));
const FIGURES =
  process.env.BENCH_FIGURES_FILE ??
  join('.data', 'bench', `broadcast-${N}-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);

async function main() {
  const sink = await startCountingSink();
  const dns = await startTestDns();
  dns.zone.set('rcpt.test', 'MX', [{ value: 'sink.rcpt.test', priority: 10 }]);
  dns.zone.set('sink.rcpt.test', 'A', [{ value: '127.0.0.1' }]);
  const pg = await createTestDatabase();
  const dataDir = mkdtempSync(join(tmpdir(), 'svc-bench-'));
  // The dev server keeps its state in a file in DATA_DIR, as `npm start` runs it: held in memory, every
  // closed run's history would grow its RSS through a long broadcast (BENCH_TEMPORAL_MEMORY=1 keeps that).
  const temporal = process.env.TEMPORAL_ADDRESS
    ? undefined
    : await startDevServer({
        port: await freePort(),
        namespace: 'default',
        dbFile: process.env.BENCH_TEMPORAL_MEMORY === '1' ? undefined : join(dataDir, 'temporal.db'),
      });
  const port = await freePort();
  const passthrough = Object.fromEntries(
    Object.entries(process.env).filter(([k, v]) => k.startsWith('BROADCAST_') && v),
  ) as Record<string, string>;
  const env: Record<string, string> = {
    PORT: String(port),
    SMTP_PORT: String(await freePort()),
    DATA_DIR: dataDir,
    DATABASE_URL: pg.url,
    TEMPORAL_ADDRESS: process.env.TEMPORAL_ADDRESS ?? temporal!.address,
    SERVICE_DOMAIN: 'bench.svc.test',
    OUTBOUND_MODE: 'mx',
    MX_PORT: String(sink.port),
    DNS_SERVERS: dns.server.address,
    SECRET_KEY: 'bench-secret-key-0123456789-abcdefghijklmnop',
    NODE_ENV: 'production',
    ALLOW_PRIVATE_NETWORKS: '1',
    SHAPING_FILE: sinkShapingFile(dataDir),
    PLANS: JSON.stringify({ free: { includedEmails: null, dailySendCap: null, overage: 'metered', paid: true } }),
    TEMPORAL_TASK_QUEUE: `bench-${Date.now()}`,
    BROADCAST_FOOTER_ADDRESS: '1 Bench Road, Testville',
    // The audience is one account's list: its contact cap (100,000 by default) must hold it.
    CONTACTS_PER_ACCOUNT: String(Math.max(100_000, N)),
    ...passthrough,
  };
  const config = loadConfig(env);
  const split = process.env.BENCH_SPLIT !== '0';
  const service = await startService(config, split ? [] : ['api', 'worker'], { log: () => undefined });
  const roles = split ? [await spawnRole(['main.ts', 'api'], env, '[api] listening'), await spawnWorker(env)] : [];
  const api = apiClient(`http://127.0.0.1:${port}`);
  try {
    const s = (
      await api('POST', '/api/auth/signup', { body: { email: 'bench@example.com', password: 'bench password' } })
    ).body;
    await service.core.db.update(schema.users).set({ emailVerified: true }).where(eq(schema.users.id, s.user.id));
    const dom = (await api('POST', '/api/domains/subdomain', { token: s.token, body: { subdomain: 'fast' } })).body
      .domain;
    const key = (await api('GET', '/api/keys', { token: s.token })).body.key;
    const from = 'Bench <news@fast.bench.svc.test>';
    const html = "<p>Hello <b>{{email}}</b>, here is this month's news.</p>";

    // The audience: N contacts in a list. The first API_ADDED are added through the API, 1,000 per call; the
    // rest are written in one statement of the same rows (adding a million through the API takes over half an
    // hour on a 2-core machine, each call counting the account's contacts against its cap; it is not measured).
    const list = (await api('POST', '/api/lists', { token: key, body: { name: 'bench' } })).body;
    const viaApi = Math.min(N, API_ADDED);
    for (let i = 0; i < viaApi; i += 1000) {
      const emails = Array.from({ length: Math.min(1000, viaApi - i) }, (_, j) => `user${i + j}@rcpt.test`);
      const r = await api('POST', `/api/lists/${list.id}/contacts`, { token: key, body: { emails } });
      if (r.status !== 200) throw new Error(`adding contacts: ${r.status} ${JSON.stringify(r.body)}`);
    }
    if (N > viaApi)
      await service.core.db.execute(sql`with added as (
          insert into contacts (id, user_id, email, attributes, subscribed, created_at, updated_at)
          select 'ctc_bench' || g, ${s.user.id}, 'user' || g || '@rcpt.test', '{}'::jsonb, true, ${Date.now()}::bigint + g, ${Date.now()}::bigint + g
          from generate_series(${viaApi}::int, ${N - 1}::int) g
          returning id, created_at)
        insert into list_members (list_id, contact_id, added_at) select ${list.id}, id, created_at from added`);

    // (b) the ceiling: the same number of messages, DKIM-signed and sent by a pooled nodemailer transport.
    const [row] = await service.core.db.select().from(schema.domains).where(eq(schema.domains.id, dom.id));
    const direct = nodemailer.createTransport({
      host: '127.0.0.1',
      port: sink.port,
      pool: true,
      maxConnections: 5,
      secure: false,
      ignoreTLS: true,
      dkim: {
        domainName: row!.domain,
        keySelector: row!.dkimSelector,
        privateKey: service.core.sealer.open(row!.dkimPrivateKeySealed),
      },
    });
    sink.reset();
    const t0 = performance.now();
    await pool(CEILING_N, C, (i) =>
      direct.sendMail({
        from,
        to: `user${i}@rcpt.test`,
        subject: 'Monthly news',
        html: html.replace('{{email}}', `user${i}@rcpt.test`),
        text: 'Hello',
      }),
    );
    const ceiling = CEILING_N / ((performance.now() - t0) / 1000);
    direct.close();

    // (a) the broadcast, from the send call to the last message in the sink.
    const b = (
      await api('POST', '/api/broadcasts', {
        token: key,
        body: { from, subject: 'Monthly news', html, text: 'Hello {{email}}', audience: { type: 'list', id: list.id } },
      })
    ).body;
    sink.reset();
    const groups = [
      ...(split
        ? [
            { name: 'api', pids: () => [roles[0]!.pid] },
            { name: 'worker', pids: () => [roles[1]!.pid] },
          ]
        : [{ name: 'service', pids: () => [process.pid] }]),
      { name: 'temporal', pids: () => descendantsByComm(process.pid, 'temporal') },
      { name: 'postgres', pids: () => pidsByComm('postgres') },
    ];
    const rss = sampleRss(groups, () => sink.count, Number(process.env.BENCH_RSS_EVERY_MS ?? 5_000));
    const start = performance.now();
    const sent = await api('POST', `/api/broadcasts/${b.id}/send`, { token: key, body: {} });
    if (sent.status !== 202) throw new Error(`send: ${sent.status} ${JSON.stringify(sent.body)}`);
    let secs: number;
    try {
      await sink.waitForCount(N, TIMEOUT_MS);
    } finally {
      secs = (performance.now() - start) / 1000;
      rss.stop();
      // Written even when (a) times out: the partial figures are figures too.
      mkdirSync(dirname(FIGURES), { recursive: true });
      writeFileSync(
        FIGURES,
        JSON.stringify(
          {
            recipients: N,
            delivered: sink.count,
            seconds: secs,
            rate: sink.count / secs,
            ceiling: { messages: CEILING_N, rate: ceiling },
            split,
            batchSize: config.broadcast.batchSize,
            concurrency: config.broadcast.concurrency,
            batchesPerRun: config.broadcast.batchesPerRun,
            at: new Date().toISOString(),
            rssMib: rss.summary(),
            samples: rss.samples,
          },
          null,
          1,
        ),
      );
    }
    const rate = N / secs;
    const final = await waitClosed(api, key, b.id);

    console.log(
      `recipients ${N}, ${split ? 'API and worker in separate processes' : 'one process'}, batch ${config.broadcast.batchSize}, ${config.broadcast.concurrency} batches in flight`,
    );
    console.log(
      `(a) broadcast: ${rate.toFixed(1)} recipients/s (${secs.toFixed(1)} s); final status ${final.status}, sent_count ${final.sent_count}, fail_count ${final.fail_count}`,
    );
    console.log(
      `(b) ceiling, pooled nodemailer + DKIM direct to the sink: ${ceiling.toFixed(1)}/s (${CEILING_N} messages)`,
    );
    console.log(`(a)/(b) = ${(rate / ceiling).toFixed(2)}`);
    console.log(
      `100,000 recipients at this rate: ${(100_000 / rate / 60).toFixed(1)} min (extrapolated from ${N}, not measured)`,
    );
    for (const [name, r] of Object.entries(rss.summary()))
      console.log(
        `RSS ${name}: min ${r.min} MiB, max ${r.max} MiB, after warm-up ${r.afterWarmup} MiB, last ${r.last} MiB`,
      );
    console.log(`figures: ${FIGURES}`);
  } finally {
    for (const r of roles) await r.stop();
    await service.stop();
    await temporal?.stop();
    await pg.drop();
    await sink.close();
    await dns.close();
  }
}

/** Polls the broadcast until the workflow has closed it. */
async function waitClosed(api: ReturnType<typeof apiClient>, key: string, id: string) {
  for (let i = 0; i < 600; i++) {
    const b = (await api('GET', `/api/broadcasts/${id}`, { token: key })).body;
    if (['sent', 'failed', 'canceled'].includes(b.status)) return b;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('the broadcast did not close within a minute of its last message');
}

await main();
