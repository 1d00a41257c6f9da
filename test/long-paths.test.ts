import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schema } from '../db/index.js';
import { connectTemporal, type TemporalHandle } from '../temporal/client.js';
import { deferredDeliveryWorkflowId, verifyDomainWorkflowId } from '../workflows/ids.js';
import { referenceWorkflow } from '../workflows/reference.js';
import { startSendingStack, type SendingStack } from './helpers/sending.js';
import { eventually } from './helpers/stack.js';

/**
 * The long paths no other test reaches, with ladders and deadlines shortened through configuration
 * (no time-skipping server offline; DESIGN.md, Testing strategy): the verification loop through
 * continue-as-new to its deadline, and the whole deferred-delivery ladder ending in a bounce.
 */
let env: SendingStack;
let t: TemporalHandle;
beforeAll(async () => {
  env = await startSendingStack({
    onRcpt: (addr) =>
      addr.startsWith('always-busy') ? { code: 452, message: '4.2.2 Mailbox full, try later' } : undefined,
    env: {
      DOMAIN_VERIFY_INITIAL_MS: '100',
      DOMAIN_VERIFY_MAX_MS: '200',
      DOMAIN_VERIFY_DEADLINE_MS: '4000',
      OUTBOUND_RETRY_SCHEDULE: '300,300,300',
    },
  });
  t = await connectTemporal({
    address: env.stack.service.temporalAddress,
    namespace: 'default',
    taskQueue: env.stack.config.temporal.taskQueue,
  });
});
afterAll(async () => {
  await t?.connection.close();
  await env?.stop();
});

describe('long paths', () => {
  it("the benchmarks' reference workflow (two local activities) completes", async () => {
    await t.client.workflow.execute(referenceWorkflow, {
      taskQueue: t.taskQueue,
      workflowId: `reference-${Date.now()}`,
    });
  });

  it('the verification loop continues as new and still ends at its deadline', async () => {
    const res = await env.stack.api('POST', '/api/domains', {
      token: env.session,
      body: { domain: 'never-published.example.com' },
    });
    expect(res.status).toBe(201);
    const id = verifyDomainWorkflowId(res.body.domain.id);
    const result = await t.client.workflow.getHandle(id).result();
    expect(result).toMatchObject({ outcome: 'timed_out', status: 'pending' });
    // Visibility follows the runs a moment later: wait until the completed run is listed.
    const runs = await eventually(
      async () => {
        const all: string[] = [];
        for await (const w of t.client.workflow.list({ query: `WorkflowId = '${id}'` })) all.push(w.status.name);
        return all.includes('COMPLETED') ? all : undefined;
      },
      30_000,
      250,
    );
    expect(runs.filter((s) => s === 'CONTINUED_AS_NEW').length).toBeGreaterThanOrEqual(1);
    expect(runs.filter((s) => s === 'COMPLETED')).toHaveLength(1);
  });

  it('the whole deferred ladder ends in a bounce of the still-deferred recipient alone, keeping its temporary class (no suppression)', async () => {
    const send = await env.send({ to: ['always-busy@rcpt.test', 'fine@rcpt.test'] });
    const id = send.body.id;
    const ladder = t.client.workflow.getHandle(deferredDeliveryWorkflowId(id));
    await eventually(() => ladder.describe());
    const result = await ladder.result();
    expect(result).toMatchObject({ outcome: 'sent', attempts: 4 });
    const [row] = await env.stack.service.core.db.select().from(schema.messages).where(eq(schema.messages.id, id));
    expect(row!.recipients!['fine@rcpt.test']).toMatchObject({ status: 'sent', attempts: 1 });
    expect(row!.recipients!['always-busy@rcpt.test']).toMatchObject({
      status: 'bounced',
      attempts: 4,
      bounceClass: 'mailbox_full',
    });
    expect(row!.trail!.map((e) => e.status)).toEqual(['mixed', 'deferred', 'deferred', 'bounced']);
    const events = (await env.stack.api('GET', `/api/events?messageId=${id}`, { token: env.key })).body.map(
      (e: any) => e.type,
    );
    expect(events.filter((e: string) => e === 'email.bounced')).toHaveLength(1);
    expect(events.filter((e: string) => e === 'email.deferred')).toHaveLength(3);
    // A full mailbox is not a dead address: the bounce is recorded, the address stays sendable.
    const sups = (await env.stack.api('GET', '/api/contacts/suppressions', { token: env.session })).body;
    expect(sups.some((s: any) => s.email === 'always-busy@rcpt.test')).toBe(false);
    expect(env.sink.received.filter((r) => r.to.includes('fine@rcpt.test'))).toHaveLength(1);
  });
});
