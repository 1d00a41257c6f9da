/**
 * npm run bench:events — application events on this machine: PostgreSQL, the Temporal dev server, the API
 * in this process and the worker in its own. Measures (a) events accepted/s when no sequence uses the name
 * (recording alone), (b) events accepted/s that each start an enrolment, and enrolments started/s until
 * each is parked on its wait_for_event, (c) events accepted/s that each wake a parked enrolment, and
 * enrolments woken (and finished)/s end to end; then (d) the reference: workflows with two local
 * activities on the same server in the same run (DESIGN.md, The Temporal budget).
 *   BENCH_EVENTS (default 500), BENCH_CONCURRENCY (default 16), TEST_PG_URL, TEMPORAL_ADDRESS.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { and, eq, sql } from 'drizzle-orm';
import { loadConfig } from '../core/config.js';
import { schema } from '../db/index.js';
import { startService } from '../runtime/service.js';
import {} from '../worker.js';
import { startDevServer } from '../temporal/dev-server.js';
import { createTestDatabase } from '../test/helpers/pg.js';
import { freePort } from '../test/helpers/ports.js';
import { apiClient } from '../test/helpers/stack.js';
import { referenceWorkflow } from '../workflows/reference.js';
import { pool, spawnWorker } from './util.js';

const N = Number(process.env.BENCH_EVENTS ?? 500);
const C = Number(process.env.BENCH_CONCURRENCY ?? 16);

async function main() {
  const pg = await createTestDatabase();
  const temporal = process.env.TEMPORAL_ADDRESS
    ? undefined
    : await startDevServer({ port: await freePort(), namespace: 'default' });
  const env: Record<string, string> = {
    PORT: String(await freePort()),
    SMTP_PORT: String(await freePort()),
    DATA_DIR: mkdtempSync(join(tmpdir(), 'svc-bench-')),
    DATABASE_URL: pg.url,
    TEMPORAL_ADDRESS: process.env.TEMPORAL_ADDRESS ?? temporal!.address,
    SERVICE_DOMAIN: 'bench.svc.test',
    DNS_SERVERS: '127.0.0.1:9',
    SECRET_KEY: 'bench-secret-key-0123456789-abcdefghijklmnop',
    SIGNUP_LIMIT_PER_HOUR: '1000',
    NODE_ENV: 'production',
    ALLOW_PRIVATE_NETWORKS: '1',
    TEMPORAL_TASK_QUEUE: `bench-${Date.now()}`,
  };
  const config = loadConfig(env);
  const split = process.env.BENCH_SPLIT !== '0';
  const service = await startService(config, split ? ['api'] : ['api', 'worker'], { log: () => undefined });
  const worker = split ? await spawnWorker(env) : undefined;
  const api = apiClient(`http://127.0.0.1:${service.apiPort}`);
  const db = service.core.db;
  const e = schema.sequenceEnrolments;
  const count = async (where: ReturnType<typeof and>) =>
    Number(
      (
        await db
          .select({ n: sql<number>`count(*)::int` })
          .from(e)
          .where(where)
      )[0]!.n,
    );
  const waitFor = async (cond: () => Promise<boolean>) => {
    while (!(await cond())) await new Promise((r) => setTimeout(r, 50));
  };
  try {
    const s = (
      await api('POST', '/api/auth/signup', { body: { email: 'bench-events@example.com', password: 'bench password' } })
    ).body;
    await db.update(schema.users).set({ emailVerified: true }).where(eq(schema.users.id, s.user.id));
    await api('POST', '/api/domains/subdomain', { token: s.token, body: { subdomain: 'drip' } });
    const key = (await api('GET', '/api/keys', { token: s.token })).body.key;
    const list = (await api('POST', '/api/lists', { token: s.token, body: { name: 'bench' } })).body;
    const emails = Array.from({ length: N }, (_, i) => `user${i}@bench.example`);
    for (let i = 0; i < N; i += 1000)
      await api('POST', `/api/lists/${list.id}/contacts`, {
        token: s.token,
        body: { emails: emails.slice(i, i + 1000) },
      });
    const seq = (
      await api('POST', '/api/sequences', {
        token: s.token,
        body: {
          name: 'bench',
          status: 'active',
          from: 'hello@drip.bench.svc.test',
          trigger: { type: 'event', event: 'bench-start' },
          steps: [{ type: 'wait_for_event', event: 'bench-wake', timeout: '1h', onArrived: 'exit' }],
        },
      })
    ).body;
    const post = (name: string, i: number) =>
      api('POST', '/v1/events', { token: key, body: { name, email: emails[i], payload: { i } } }).then((r) => {
        if (r.status !== 202) throw new Error(`POST /v1/events answered ${r.status}: ${JSON.stringify(r.body)}`);
      });
    const timed = async (fn: () => Promise<unknown>) => {
      const t = performance.now();
      await fn();
      return (performance.now() - t) / 1000;
    };

    const recordOnly = await timed(() => pool(N, C, (i) => post('bench-noise', i)));
    let startAccept = 0;
    const started = await timed(async () => {
      startAccept = await timed(() => pool(N, C, (i) => post('bench-start', i)));
      await waitFor(
        async () =>
          (await count(
            and(
              eq(e.sequenceId, seq.id),
              eq(e.status, 'running'),
              eq(e.currentStep, 0),
              sql`${e.waitingFor} is not null`,
            ),
          )) >= N,
      );
    });
    let wakeAccept = 0;
    const woken = await timed(async () => {
      wakeAccept = await timed(() => pool(N, C, (i) => post('bench-wake', i)));
      await waitFor(async () => (await count(and(eq(e.sequenceId, seq.id), eq(e.status, 'completed')))) >= N);
    });

    const { connectTemporal } = await import('../temporal/client.js');
    const t = await connectTemporal({
      address: service.temporalAddress,
      namespace: config.temporal.namespace,
      taskQueue: config.temporal.taskQueue,
    });
    const refSecs = await timed(() =>
      pool(N, C, (i) =>
        t.client.workflow.execute(referenceWorkflow, {
          taskQueue: config.temporal.taskQueue,
          workflowId: `bench-ref-${Date.now()}-${i}`,
        }),
      ),
    );
    await t.connection.close();
    const rate = (secs: number) => (N / secs).toFixed(1);
    console.log(
      `events ${N} per phase, ${C} concurrent HTTP clients, ${split ? 'worker in its own process' : 'one process'}`,
    );
    console.log(`(a) events accepted, no sequence uses the name (recording alone): ${rate(recordOnly)}/s`);
    console.log(
      `(b) events accepted that each start an enrolment: ${rate(startAccept)}/s; enrolments started and parked on wait_for_event: ${rate(started)}/s`,
    );
    console.log(
      `(c) events accepted that each wake a parked enrolment: ${rate(wakeAccept)}/s; enrolments woken and finished: ${rate(woken)}/s`,
    );
    console.log(`(d) reference: workflows with two local activities, same server, same run: ${rate(refSecs)}/s`);
    console.log(`(b) started/(d) = ${(refSecs / started).toFixed(2)}; (c) woken/(d) = ${(refSecs / woken).toFixed(2)}`);
  } finally {
    await worker?.stop();
    await service.stop();
    await temporal?.stop();
    await pg.drop();
  }
}

await main();
