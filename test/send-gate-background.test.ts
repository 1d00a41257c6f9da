import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schema } from '../db/index.js';
import { clearOfMidnight, GATE_PLANS, gateAccount, receivedBy, type GateAccount } from './helpers/gate.js';
import { ingress } from './helpers/mailbox.js';
import { startSendingStack, type SendingStack } from './helpers/sending.js';
import { eventually } from './helpers/stack.js';

/** The send gate on the paths that send later, off the caller's request: broadcast fan-out, sequence steps, route forwards. */
let env: SendingStack;
let mail: ReturnType<typeof ingress>;
beforeAll(async () => {
  env = await startSendingStack({ env: { PLANS: JSON.stringify(GATE_PLANS), BROADCAST_BATCH_SIZE: '3' } });
  mail = ingress(env.stack);
});
afterAll(async () => {
  await env?.stop();
});

const addresses = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}-${i}@rcpt.test`);

describe('broadcasts', () => {
  async function draftTo(a: GateAccount, emails: string[]) {
    const list = (await a.api('POST', '/api/lists', { name: 'gate' })).body;
    await a.api('POST', `/api/lists/${list.id}/contacts`, { emails });
    return (
      await a.api('POST', '/api/broadcasts', {
        from: `news@${a.domain}`,
        subject: 'News',
        text: 'Hi {{email}}',
        audience: { type: 'list', id: list.id },
      })
    ).body;
  }
  const finished = (a: GateAccount, id: string) =>
    eventually(async () => {
      const b = (await a.api('GET', `/api/broadcasts/${id}`)).body;
      return ['sent', 'failed', 'canceled'].includes(b.status) ? b : undefined;
    }, 60_000);
  const ledger = (id: string) =>
    env.stack.service.core.db
      .select()
      .from(schema.broadcastRecipients)
      .where(eq(schema.broadcastRecipients.broadcastId, id));

  it('refuses on the call an unverified account, and an audience of 16 on a daily cap of 10 (with both counts); nothing is sent', async () => {
    const unverified = await gateAccount(env, 'bc-unverified', { verified: false });
    const b1 = await draftTo(unverified, addresses('bcu', 2));
    expect(await unverified.api('POST', `/api/broadcasts/${b1.id}/send`)).toMatchObject({
      status: 403,
      body: { code: 'email_not_verified' },
    });
    const ten = await gateAccount(env, 'bc-ten', { plan: 'ten' });
    const b2 = await draftTo(ten, addresses('bct', 16));
    const refused = await ten.api('POST', `/api/broadcasts/${b2.id}/send`);
    expect(refused).toMatchObject({ status: 429, body: { code: 'daily_limit' } });
    expect(refused.body.error).toMatch(/16 recipients.*allows 10 more today/);
    expect((await ten.api('GET', `/api/broadcasts/${b2.id}`)).body.status).toBe('draft');
    expect(await ten.outbound()).toEqual([]);
  });

  it('the fan-out reserves every batch: recipients past the cap fail with daily_limit, the rest are sent once', async () => {
    await clearOfMidnight();
    const ten = await gateAccount(env, 'bc-fanout', { plan: 'ten' });
    const emails = addresses('bcf', 8);
    const b = await draftTo(ten, emails);
    expect(
      (await ten.api('POST', `/api/broadcasts/${b.id}/send`, { scheduledAt: Date.now() + 4000 })).body.status,
    ).toBe('scheduled');
    // Before its time, five of the ten places of the day go to other sends.
    for (let i = 0; i < 5; i++) expect((await ten.send({ to: `other-${i}@rcpt.test` })).status).toBe(200);
    const done = await finished(ten, b.id);
    expect(done).toMatchObject({ status: 'sent', sent_count: 5, fail_count: 3 });
    const failed = (await ledger(b.id)).filter((r) => r.status === 'failed');
    expect(failed.map((r) => r.skipReason)).toEqual(['daily_limit', 'daily_limit', 'daily_limit']);
    const got = receivedBy(env, emails);
    expect(got.length).toBe(5);
    expect(new Set(got).size).toBe(5);
    expect(got.some((a) => failed.some((r) => r.email === a))).toBe(false);
  });

  it('an account no longer verified when the fan-out starts sends nothing: every recipient fails with email_not_verified', async () => {
    const gone = await gateAccount(env, 'bc-gone');
    const emails = addresses('bcg', 4);
    const b = await draftTo(gone, emails);
    expect(
      (await gone.api('POST', `/api/broadcasts/${b.id}/send`, { scheduledAt: Date.now() + 4000 })).body.status,
    ).toBe('scheduled');
    await gone.setStanding({ emailVerified: false });
    expect(await finished(gone, b.id)).toMatchObject({ status: 'failed', sent_count: 0, fail_count: 4 });
    expect((await ledger(b.id)).map((r) => [r.status, r.skipReason])).toEqual(
      Array(4).fill(['failed', 'email_not_verified']),
    );
    expect(receivedBy(env, emails)).toEqual([]);
    expect(await gone.outbound()).toEqual([]);
  });
});

describe('sequences', () => {
  async function welcome(a: GateAccount, contacts: string[]) {
    const seq = (
      await a.api('POST', '/api/sequences', {
        name: 'Welcome',
        status: 'active',
        from: `hello@${a.domain}`,
        trigger: { type: 'event', event: 'joined' },
        steps: [{ type: 'send', subject: 'Welcome', text: 'Hi' }],
      })
    ).body;
    for (const email of contacts) {
      await a.api('POST', '/api/contacts', { email });
      expect((await a.api('POST', '/v1/events', { name: 'joined', email })).status).toBe(202);
    }
    return eventually(async () => {
      const rows = (await a.api('GET', `/api/sequences/${seq.id}/enrolments?limit=100`)).body as any[];
      return rows.length === contacts.length && rows.every((e) => e.status !== 'running') ? rows : undefined;
    }, 30_000);
  }

  it("an unverified or suspended account's sequence sends nothing to an outside address: the enrolment exits with the reason", async () => {
    const unverified = await gateAccount(env, 'seq-unverified', { verified: false });
    const suspended = await gateAccount(env, 'seq-suspended');
    await suspended.setStanding({ suspendedAt: Date.now() });
    for (const [a, email, code] of [
      [unverified, 'sequ@rcpt.test', 'email_not_verified'],
      [suspended, 'seqs@rcpt.test', 'account_suspended'],
    ] as const) {
      const [e] = await welcome(a, [email]);
      expect(e).toMatchObject({ status: 'exited', exitReason: code });
      expect(await a.outbound()).toEqual([]);
    }
    expect(receivedBy(env, ['sequ@rcpt.test', 'seqs@rcpt.test'])).toEqual([]);
  });

  it('past the daily cap a step is refused: the enrolment exits with daily_limit and its email is not sent', async () => {
    await clearOfMidnight();
    const tiny = await gateAccount(env, 'seq-tiny', { plan: 'tiny' });
    const emails = addresses('seqt', 3);
    const ended = await welcome(tiny, emails);
    expect(ended.map((e) => e.status).sort()).toEqual(['completed', 'completed', 'exited']);
    const exited = ended.find((e) => e.status === 'exited');
    expect(exited.exitReason).toBe('daily_limit');
    await eventually(async () => receivedBy(env, emails).length === 2);
    expect(receivedBy(env, emails)).not.toContain(exited.email);
    expect((await tiny.outbound()).length).toBe(2);
  });
});

describe('route forwards', () => {
  const forwardRoute = (a: GateAccount, to: string) =>
    a.api('POST', '/api/routes', { match: `fwd@${a.domain}`, action: 'forward', destination: to }, a.session);
  const forwards = async (a: GateAccount, n: number) =>
    eventually(async () => {
      const rows = await a.outbound();
      return rows.length === n ? rows : undefined;
    });

  it('an unverified account forwards nothing: the outbound row is failed and says why; the inbound mail is still received', async () => {
    const unverified = await gateAccount(env, 'fwd-unverified', { verified: false });
    expect((await forwardRoute(unverified, 'fwd-owner-u@rcpt.test')).status).toBe(201);
    await mail({ to: `fwd@${unverified.domain}`, subject: 'forward me' });
    const [row] = await forwards(unverified, 1);
    expect(row).toMatchObject({ status: 'failed', toAddrs: ['fwd-owner-u@rcpt.test'], attachments: null });
    expect(row!.lastError).toMatch(/^email_not_verified: /);
    const inbound = await env.stack.service.core.db
      .select()
      .from(schema.messages)
      .where(eq(schema.messages.userId, unverified.userId));
    expect(inbound.filter((m) => m.direction === 'inbound').map((m) => m.subject)).toEqual(['forward me']);
    expect(receivedBy(env, ['fwd-owner-u@rcpt.test'])).toEqual([]);
  });

  it('past the daily cap a forward fails with daily_limit; the ones within it go out', async () => {
    await clearOfMidnight();
    const tiny = await gateAccount(env, 'fwd-tiny', { plan: 'tiny' });
    expect((await forwardRoute(tiny, 'fwd-owner-t@rcpt.test')).status).toBe(201);
    for (const subject of ['one', 'two', 'three']) await mail({ to: `fwd@${tiny.domain}`, subject });
    const rows = await forwards(tiny, 3);
    expect(rows.filter((r) => r.status === 'failed').map((r) => [r.subject, r.lastError?.split(':')[0]])).toEqual([
      ['three', 'daily_limit'],
    ]);
    await eventually(async () => receivedBy(env, ['fwd-owner-t@rcpt.test']).length === 2);
  });
});
