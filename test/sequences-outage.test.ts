import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sequenceHelpers } from './helpers/sequences.js';
import { startSendingStack, type SendingStack } from './helpers/sending.js';
import { eventually } from './helpers/stack.js';
import { startWorkerProcess } from './helpers/worker-process.js';

/** The worker is its own process here, killed (SIGKILL) while enrolments wait on timers and for events. */
let env: SendingStack;
let h: ReturnType<typeof sequenceHelpers>;
let workerEnv: Record<string, string>;
beforeAll(async () => {
  env = await startSendingStack({ roles: ['api', 'smtp'] });
  const c = env.stack.config;
  workerEnv = {
    OUTBOUND_MODE: 'mx',
    MX_PORT: String(env.sink.port),
    DNS_SERVERS: env.dns.server.address,
    SERVICE_DOMAIN: c.serviceDomain,
    OUTBOUND_RETRY_SCHEDULE: '500,500',
    ALLOW_PRIVATE_NETWORKS: '1',
    DATABASE_URL: c.databaseUrl!,
    TEMPORAL_ADDRESS: env.stack.service.temporalAddress,
    TEMPORAL_TASK_QUEUE: c.temporal.taskQueue,
    SECRET_KEY: c.secretKey,
    DATA_DIR: c.dataDir,
    NODE_ENV: 'test',
    PUBLIC_URL: c.publicUrl,
  };
  h = sequenceHelpers(env);
}, 180_000);
afterAll(async () => {
  await env?.stop();
});

describe('enrolments across a worker crash', () => {
  it('killing the worker during waits loses nothing: each enrolment resumes and finishes once', async () => {
    let worker = await startWorkerProcess(workerEnv);
    try {
      const seq = await h.sequence({
        name: 'Crash',
        trigger: { type: 'event', event: 'crash-start' },
        steps: [
          { type: 'send', subject: 'First', text: '1' },
          { type: 'wait', duration: '2s' },
          { type: 'wait_for_event', event: 'activated', timeout: '2s', onArrived: 'done' },
          { type: 'send', subject: 'Reminder', text: 'r' },
          { type: 'exit' },
          { type: 'send', id: 'done', subject: 'Thanks', text: 't' },
        ],
      });
      const emails = Array.from({ length: 10 }, (_, i) => `crash-${i}@rcpt.test`);
      for (const e of emails) await h.contact(e);
      for (const email of emails) await h.event({ name: 'crash-start', email });
      await eventually(async () => emails.every((e) => h.subjects(e).length === 1), 30_000);
      await worker.kill();
      // While no worker runs: events for half of them are recorded and handed to their (parked) enrolments.
      for (const email of emails.slice(0, 5)) await h.event({ name: 'activated', email });
      worker = await startWorkerProcess(workerEnv);

      for (const [i, email] of emails.entries()) {
        const [e] = await h.ended(seq.id, email, 1, 60_000);
        expect(e.status).toBe('completed');
        expect(e.steps.map((s: any) => s.outcome)).toEqual(
          i < 5 ? ['sent', 'waited', 'arrived', 'sent'] : ['sent', 'waited', 'timed_out', 'sent'],
        );
      }
      await eventually(async () => emails.every((e) => h.subjects(e).length === 2), 30_000);
      for (const [i, email] of emails.entries())
        expect(h.subjects(email)).toEqual(['First', i < 5 ? 'Thanks' : 'Reminder']);

      // Visible in the Temporal UI by sequence, contact and step.
      const client = new Client({
        connection: await Connection.connect({ address: env.stack.service.temporalAddress }),
      });
      try {
        const [e0] = await h.ended(seq.id, emails[0]!);
        const runs = await eventually(async () => {
          const found: string[] = [];
          for await (const w of client.workflow.list({
            query: `SvcSequenceId = '${seq.id}' AND SvcContactId = '${e0.contactId}' AND SvcSequenceStep = 5`,
          }))
            found.push(w.workflowId);
          return found.length ? found : undefined;
        });
        expect(runs).toEqual([e0.workflowId]);
      } finally {
        await client.connection.close();
      }
    } finally {
      await worker.kill();
    }
  });
});
