/**
 * npm run bench:inbound — inbound throughput on this machine: PostgreSQL, the Temporal dev server, the
 * API + SMTP ingress in this process, the worker in its own, the webhook receiver, the DNS server and the SMTP
 * load generator (bench/smtp-load.ts) each in its own. Measures
 * (a) the ingress alone (SMTP accept, parse, SPF/DKIM/DMARC scoring, persist; no workflow started),
 * (b) messages accepted over SMTP and delivered, signed, to the loopback webhook (inbound batch runs),
 * and (c) workflows with two local activities on the same server; prints accepted/(a) and delivered/(c), and
 * exits 1 when either is below its floor in bench/floors.ts (BENCH_FLOOR_<NAME> overrides one). Beside (b)'s CPU
 * per message it prints (a)'s, over the same processes, and the ratio of the two, which carries from machine to
 * machine. BENCH_REPEAT=<n> runs it all n times, each on a fresh stack, and prints the medians.
 *   BENCH_MESSAGES (default 1000), BENCH_CONCURRENCY (default 16), BENCH_REPEAT, TEST_PG_URL, TEMPORAL_ADDRESS,
 *   BENCH_STATEMENTS=1 (statements per message), BENCH_TEMPORAL_UNTUNED / BENCH_TEMPORAL_CONFIG (below).
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../core/config.js';
import { startService } from '../runtime/service.js';
import {} from '../worker.js';
import { startDevServer } from '../temporal/dev-server.js';
import { createTestDatabase } from '../test/helpers/pg.js';
import { freePort } from '../test/helpers/ports.js';
import { apiClient } from '../test/helpers/stack.js';
import {
  cpuBetween,
  pidsByComm,
  printCost,
  printStatements,
  queriesIn,
  snapshotCpu,
  statementsIn,
  temporalCalls,
  type ProcessGroup,
} from './cost.js';
import { checkFloors } from './floors.js';
import { pool, repeatRuns, runScript, spawnRole, spawnWorker, type Figures } from './util.js';
import { referenceWorkflow } from '../workflows/reference.js';

const N = Number(process.env.BENCH_MESSAGES ?? 1000);
const C = Number(process.env.BENCH_CONCURRENCY ?? 16);

async function main(): Promise<Figures> {
  // The DNS host is the senders' and recipients', not the service's: a process of its own (bench/dns-server.ts).
  const dns = await spawnRole(['bench/dns-server.ts'], {}, 'listening');
  const dnsAddress = /listening (\S+)/.exec(dns.output)![1]!;
  // The webhook receiver is the customer's server: its own process, so it shares no event loop with the ingress.
  const hooks = await spawnRole(['bench/webhook-sink.ts'], {}, 'listening');
  const hooksBase = `http://127.0.0.1:${/listening (\d+)/.exec(hooks.output)![1]}`;
  const received = async () => Number(await (await fetch(`${hooksBase}/count`)).text());
  const pg = await createTestDatabase();
  const temporal = process.env.TEMPORAL_ADDRESS
    ? undefined
    : await startDevServer({
        port: await freePort(),
        namespace: 'default',
        // BENCH_TEMPORAL_UNTUNED=1: the dev server without this project's dynamic config; BENCH_TEMPORAL_CONFIG adds key=value,key=value.
        untuned: process.env.BENCH_TEMPORAL_UNTUNED === '1',
        dynamicConfig: process.env.BENCH_TEMPORAL_CONFIG?.split(',').filter(Boolean) ?? [],
      });
  const env: Record<string, string> = {
    PORT: String(await freePort()),
    SMTP_PORT: String(await freePort()),
    DATA_DIR: mkdtempSync(join(tmpdir(), 'svc-bench-')),
    DATABASE_URL: pg.url,
    TEMPORAL_ADDRESS: process.env.TEMPORAL_ADDRESS ?? temporal!.address,
    SERVICE_DOMAIN: 'bench.svc.test',
    DNS_SERVERS: dnsAddress,
    SECRET_KEY: 'bench-secret-key-0123456789-abcdefghijklmnop',
    SIGNUP_LIMIT_PER_HOUR: '1000',
    NODE_ENV: 'production',
    SMTP_MAX_CLIENTS: '500',
    SMTP_MAX_CLIENTS_PER_IP: '500',
    SMTP_COMMANDS_PER_MINUTE: '1000000',
    ALLOW_PRIVATE_NETWORKS: '1',
    PLANS: JSON.stringify({ free: { includedEmails: null, dailySendCap: null, overage: 'metered', paid: true } }),
    TEMPORAL_TASK_QUEUE: `bench-${Date.now()}`,
    // The bench account is unverified and receives far more than the daily allowance of one.
    UNVERIFIED_INBOUND_DAILY: '100000000',
    UNVERIFIED_INBOUND_DAILY_BYTES: String(1024 ** 4),
  };
  // The ingress runs in this process: its statements are counted too (the load generator sends none). Through
  // its config: set in process.env after loadConfig(env), as it once was, it counted nothing.
  const ingressStats = join(env.DATA_DIR!, 'ingress-queries.json');
  const config = loadConfig({ ...env, SVC_QUERY_STATS_FILE: ingressStats });
  // BENCH_SPLIT=0 runs every role in one process (npm start); the default runs the worker apart, like production.
  const split = process.env.BENCH_SPLIT !== '0';
  const service = await startService(config, split ? ['api', 'smtp'] : ['api', 'smtp', 'worker'], {
    log: () => undefined,
  });
  const workerStats = join(env.DATA_DIR!, 'worker-queries.json');
  const worker = split ? await spawnWorker({ ...env, SVC_QUERY_STATS_FILE: workerStats }) : undefined;
  const groups: ProcessGroup[] = [
    { name: split ? 'API + SMTP' : 'all roles', pids: () => [process.pid] },
    ...(worker ? [{ name: 'worker', pids: () => [worker.pid] }] : []),
    { name: 'PostgreSQL', pids: () => pidsByComm('postgres') },
    { name: 'Temporal server', pids: () => pidsByComm('temporal') },
  ];
  const api = apiClient(`http://127.0.0.1:${service.apiPort}`);
  // The SMTP clients run in a process of their own (bench/smtp-load.ts): `load` calls `atStart` as its first
  // message goes (the CPU snapshot) and answers the seconds its N messages took to be accepted.
  const load = async (offset: number, tag: string, atStart: () => void) =>
    runScript<{ secs: number; cpuMs: number }>(
      'bench/smtp-load.ts',
      'BENCH_LOAD',
      { port: service.smtpPort!, n: N, c: C, offset, tag },
      'LOAD',
      (line) => line === 'START' && atStart(),
    );
  try {
    const s = (
      await api('POST', '/api/auth/signup', { body: { email: 'bench-in@example.com', password: 'bench password' } })
    ).body;
    const dom = (await api('POST', '/api/domains/subdomain', { token: s.token, body: { subdomain: 'inbox' } })).body
      .domain;
    await api('PUT', `/api/domains/${dom.id}/webhook`, { token: s.token, body: { url: `${hooksBase}/in` } });

    // (a) the ingress alone: the same path with the workflow start switched off.
    const port = service.core.workflows;
    const start = port.startInboundBatch;
    port.startInboundBatch = async () => undefined;
    // (a)'s own CPU, over the same processes as (b)'s below.
    let refCpuBefore = snapshotCpu(groups);
    const ingressAlone = await load(0, 'ceiling', () => (refCpuBefore = snapshotCpu(groups)));
    const ceiling = N / ingressAlone.secs;
    const refCpu = cpuBetween(refCpuBefore, snapshotCpu(groups));
    port.startInboundBatch = start;
    // The statement counts are written every 500 ms: (a)'s last ones must be in them before (b)'s snapshot.
    await new Promise((r) => setTimeout(r, 1000));

    // (b) accepted over SMTP and delivered to the webhook.
    let cpuBefore = snapshotCpu(groups);
    const sqlBefore = queriesIn([workerStats, ingressStats]);
    const statementsBefore = statementsIn([workerStats, ingressStats]);
    let t1 = performance.now();
    const accepted = await load(N, 'full', () => {
      cpuBefore = snapshotCpu(groups);
      t1 = performance.now();
    });
    const acceptSecs = accepted.secs;
    for (const deadline = Date.now() + 600_000; (await received()) < N;) {
      if (Date.now() > deadline) throw new Error(`only ${await received()}/${N} delivered`);
      await new Promise((r) => setTimeout(r, 20));
    }
    const e2eSecs = (performance.now() - t1) / 1000;
    const e2e = N / e2eSecs;
    await new Promise((r) => setTimeout(r, 1000)); // let the worker write its last count
    const cpu = cpuBetween(cpuBefore, snapshotCpu(groups));
    const sql = queriesIn([workerStats, ingressStats]) - sqlBefore;
    const statements = statementsIn([workerStats, ingressStats]);
    // (c) the yardstick: workflows with two local activities, started C at a time, each awaited.
    const { connectTemporal } = await import('../temporal/client.js');
    const t = await connectTemporal({
      address: service.temporalAddress,
      namespace: config.temporal.namespace,
      taskQueue: config.temporal.taskQueue,
    });
    const t2 = performance.now();
    await pool(N, C, (i) =>
      t.client.workflow.execute(referenceWorkflow, {
        taskQueue: config.temporal.taskQueue,
        workflowId: `bench-ref-${Date.now()}-${i}`,
      }),
    );
    const reference = N / ((performance.now() - t2) / 1000);
    const calls = await temporalCalls(t.client, config.temporal.taskQueue, [
      'inboundBatchWorkflow',
      'inboundDeliveryWorkflow',
    ]);
    await t.connection.close();
    console.log(`messages ${N}, SMTP connections ${C}, ${split ? 'worker in its own process' : 'one process'}`);
    console.log(`(a) ingress alone (accept, parse, score, persist; no workflow): ${ceiling.toFixed(1)}/s`);
    console.log(
      `(b) accepted over SMTP: ${(N / acceptSecs).toFixed(1)}/s; delivered to the webhook end to end: ${e2e.toFixed(1)}/s (${e2eSecs.toFixed(1)} s)`,
    );
    console.log(
      `accepted/(a) = ${(N / acceptSecs / ceiling).toFixed(2)}; delivered/(a) = ${(e2e / ceiling).toFixed(2)}`,
    );
    console.log(`(c) reference: workflows with two local activities, same server, same run: ${reference.toFixed(1)}/s`);
    console.log(`delivered/(c) = ${(e2e / reference).toFixed(2)}`);
    printCost('(b): accepted over SMTP and delivered ', N, cpu, sql, calls);
    const total = (m: Map<string, number>) => [...m.values()].reduce((a, b) => a + b, 0) / N;
    const refParts = [...refCpu].map(([name, ms]) => `${name} ${(ms / N).toFixed(2)}`).join(', ');
    console.log(`  CPU reference (a)       ${total(refCpu).toFixed(2)} ms (the ingress alone: ${refParts})`);
    console.log(`  CPU total / reference's ${(total(cpu) / total(refCpu)).toFixed(2)}`);
    console.log(`  (the SMTP load generator, its own process: ${(accepted.cpuMs / N).toFixed(2)} ms, not counted)`);
    printStatements(statementsBefore, statements, N);
    return {
      '(a) ingress alone/s': ceiling,
      '(b) accepted/s': N / acceptSecs,
      '(b) delivered/s': e2e,
      'accepted/(a)': N / acceptSecs / ceiling,
      '(c) reference workflows/s': reference,
      'delivered/(c)': e2e / reference,
      'CPU ms/message, (b) total': total(cpu),
      'CPU ms/message, reference (a)': total(refCpu),
      'CPU (b) / reference (a)': total(cpu) / total(refCpu),
      'SQL statements/message': sql / N,
    };
  } finally {
    await worker?.stop();
    await service.stop();
    await temporal?.stop();
    await pg.drop();
    await hooks.stop();
    await dns.stop();
  }
}

// The limits docs/benchmarks.md states (bench/floors.ts): a ratio below its floor makes the run exit 1 (judged
// on the medians when BENCH_REPEAT runs more than once).
await repeatRuns(main, (f) =>
  checkFloors({ INBOUND_ACCEPTED_RATIO: f['accepted/(a)']!, INBOUND_DELIVERED_RATIO: f['delivered/(c)']! }),
);
