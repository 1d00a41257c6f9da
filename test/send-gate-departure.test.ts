import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startWorker } from '../worker.js';
import { GATE_PLANS, gateAccount, receivedBy, type GateAccount } from './helpers/gate.js';
import { startSendingStack, type SendingStack } from './helpers/sending.js';
import { eventually } from './helpers/stack.js';

// Issue 29: "mail already queued, deferred or scheduled is never judged again (tried: a message deferred by a
// 451, its domain deleted 93 ms later, left on the retry unsigned and is recorded `sent`)". The send gate is
// judged again as each message leaves; a refused one ends `failed` with the gate's code and an `email.failed` event.
let env: SendingStack;
const rcptTries = new Map<string, number>();
beforeAll(async () => {
  env = await startSendingStack({
    // `defer-*` recipients answer 451 on their first RCPT; the retry comes 3 s later.
    onRcpt: (address) => {
      const n = (rcptTries.get(address) ?? 0) + 1;
      rcptTries.set(address, n);
      return address.startsWith('defer-') && n === 1 ? { code: 451, message: '4.7.1 Try again later' } : undefined;
    },
    env: { PLANS: JSON.stringify(GATE_PLANS), OUTBOUND_RETRY_SCHEDULE: '3000,3000' },
  });
});
afterAll(async () => {
  await env?.stop();
});

/** Waits until the account's message `id` has `status`; answers its row. */
const settled = (acct: GateAccount, id: string, status: string) =>
  eventually(async () => (await acct.outbound()).find((m) => m.id === id && m.status === status), 30_000, 100);
/** The message's timeline event types, and its `email.failed` event. */
async function timeline(acct: GateAccount, id: string) {
  const events = (await acct.api('GET', `/api/events?messageId=${id}`)).body as {
    type: string;
    data: Record<string, unknown>;
  }[];
  return { types: events.map((e) => e.type).sort(), failed: events.find((e) => e.type === 'email.failed') };
}

describe('the send gate at departure', () => {
  it('a message deferred by a 451 whose domain is deleted before the retry does not go out: failed, domain_not_verified, email.failed', async () => {
    const acct = await gateAccount(env, 'dep-deleted');
    const sent = await acct.send({ to: 'defer-deleted@rcpt.test' });
    expect(sent.status).toBe(200);
    await settled(acct, sent.body.id, 'deferred');
    expect((await acct.api('DELETE', `/api/domains/${acct.domainId}`, undefined, acct.session)).status).toBe(200);
    const msg = await settled(acct, sent.body.id, 'failed');
    expect(msg.lastError).toMatch(/^domain_not_verified: /);
    expect(msg.nextAttemptAt).toBeNull();
    expect(msg.trail!.map((t) => t.status)).toEqual(['deferred', 'refused']);
    const { types, failed } = await timeline(acct, sent.body.id);
    expect(types).toEqual(['email.deferred', 'email.failed']);
    expect(failed!.data).toMatchObject({ reason: 'domain_not_verified' });
    // The retry never reached the MX again, and nothing was delivered.
    expect(rcptTries.get('defer-deleted@rcpt.test')).toBe(1);
    expect(receivedBy(env, ['defer-deleted@rcpt.test'])).toEqual([]);
  });

  it('a scheduled message whose account is suspended before its time ends failed with account_suspended and its event', async () => {
    const acct = await gateAccount(env, 'dep-sched');
    const sent = await acct.send({ to: 'dep-sched@rcpt.test', scheduledAt: Date.now() + 4000 });
    expect(sent.body.status).toBe('scheduled');
    await acct.setStanding({ suspendedAt: Date.now() });
    const row = await eventually(async () => {
      const r = (await acct.api('GET', `/v1/scheduled/${sent.body.id}`)).body;
      return r.status === 'failed' ? r : undefined;
    }, 30_000);
    const msg = await settled(acct, row.messageId, 'failed');
    expect(msg.lastError).toMatch(/^account_suspended: /);
    const { types, failed } = await timeline(acct, row.messageId);
    expect(types).toEqual(['email.failed']);
    expect(failed!.data).toMatchObject({ reason: 'account_suspended' });
    expect(receivedBy(env, ['dep-sched@rcpt.test'])).toEqual([]);
  });

  it("a queued message whose domain-scoped key is revoked before its batch runs ends failed with key_revoked; the account key's mail goes", async () => {
    const acct = await gateAccount(env, 'dep-key');
    const created = await acct.api('POST', '/api/keys/scoped', { domainId: acct.domainId }, acct.session);
    expect(created.status).toBe(201);
    const { service } = env.stack;
    const restart = async () => {
      service.worker = await startWorker({
        core: service.core,
        address: service.temporalAddress,
        workflowBundle: { codePath: inject('workflowBundlePath') },
      });
      stopped = false;
    };
    // No worker: the batches are started but wait in Temporal until one comes back.
    await service.worker!.shutdown();
    let stopped = true;
    try {
      const byKey = await acct.send({ to: 'dep-key@rcpt.test' }, created.body.key);
      const byAccount = await acct.send({ to: 'dep-key-control@rcpt.test' });
      expect([byKey.status, byAccount.status]).toEqual([200, 200]);
      expect((await acct.api('DELETE', `/api/keys/scoped/${created.body.id}`, undefined, acct.session)).status).toBe(
        200,
      );
      await restart();
      const msg = await settled(acct, byKey.body.id, 'failed');
      expect(msg.lastError).toMatch(/^key_revoked: /);
      const { types, failed } = await timeline(acct, byKey.body.id);
      expect(types).toEqual(['email.failed']);
      expect(failed!.data).toMatchObject({ reason: 'key_revoked' });
      await settled(acct, byAccount.body.id, 'sent');
      expect(receivedBy(env, ['dep-key@rcpt.test', 'dep-key-control@rcpt.test'])).toEqual([
        'dep-key-control@rcpt.test',
      ]);
    } finally {
      if (stopped) await restart();
    }
  });
});
