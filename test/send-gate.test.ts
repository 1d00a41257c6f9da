import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { and, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schema } from '../db/index.js';
import { dayKey } from '../core/usage.js';
import { GATE_PLANS, gateAccount, receivedBy } from './helpers/gate.js';
import { SERVICE, startSendingStack, type SendingStack } from './helpers/sending.js';
import { eventually } from './helpers/stack.js';

/** The send gate on the API paths: /v1/send, batches, scheduled sends (accepted and released), and the tenancy of sequences. */
let env: SendingStack;
beforeAll(async () => {
  env = await startSendingStack({ env: { PLANS: JSON.stringify(GATE_PLANS) } });
});
afterAll(async () => {
  await env?.stop();
});

const walk = (dir: string): string[] =>
  readdirSync(dir).flatMap((f) => (statSync(join(dir, f)).isDirectory() ? walk(join(dir, f)) : [join(dir, f)]));
const counter = async (userId: string, period: string) =>
  (
    await env.stack.service.core.db
      .select()
      .from(schema.usageCounters)
      .where(and(eq(schema.usageCounters.userId, userId), eq(schema.usageCounters.period, period)))
  )[0]?.count ?? 0;

describe('one gate', () => {
  it('every module that inserts an outbound message row reserves through the send gate; system mail alone is exempt', () => {
    const inserting = walk('core')
      .filter((f) => f.endsWith('.ts') && readFileSync(f, 'utf8').includes("direction: 'outbound'"))
      .sort();
    expect(inserting).toEqual([
      'core/broadcasts/fanout-batch.ts',
      'core/mailboxes/forward.ts',
      'core/sending/service.ts',
      'core/sequences/enrolments.ts',
      'core/transport/system-mail.ts',
    ]);
    for (const f of inserting.filter((x) => !x.endsWith('system-mail.ts')))
      expect(readFileSync(f, 'utf8'), f).toMatch(/deps\.gate\.(reserve|reserveUpTo)\(/);
  });

  it('system mail is not gated: an unverified account gets its verification link', async () => {
    const res = await env.stack.api('POST', '/api/auth/signup', {
      body: { email: 'new-owner@rcpt.test', password: 'a gate password' },
    });
    expect(res.body.user.emailVerified).toBe(false);
    const got = await env.sink.waitFor((r) => r.to.includes('new-owner@rcpt.test'));
    expect(got.raw.toString()).toContain('Verify your email address');
  });
});

describe('POST /v1/send', () => {
  it('refuses an unverified and a suspended account, and past the caps answers 429 daily_limit or 402 monthly_quota_exceeded', async () => {
    const unverified = await gateAccount(env, 'send-unverified', { verified: false });
    expect(await unverified.send({ to: 'u@rcpt.test' })).toMatchObject({
      status: 403,
      body: { code: 'email_not_verified' },
    });
    const suspended = await gateAccount(env, 'send-suspended');
    await suspended.setStanding({ suspendedAt: Date.now() });
    expect(await suspended.send({ to: 's@rcpt.test' })).toMatchObject({
      status: 403,
      body: { code: 'account_suspended' },
    });

    const tiny = await gateAccount(env, 'send-tiny', { plan: 'tiny' });
    expect((await tiny.send({ to: 't1@rcpt.test' })).status).toBe(200);
    expect((await tiny.send({ to: 't2@rcpt.test' })).status).toBe(200);
    const over = await tiny.send({ to: 't3@rcpt.test' });
    expect(over).toMatchObject({ status: 429, body: { code: 'daily_limit' } });
    expect(Number(over.headers.get('retry-after'))).toBeGreaterThan(0);
    const month = await gateAccount(env, 'send-month', { plan: 'month' });
    expect((await month.send({ to: ['m1@rcpt.test', 'm2@rcpt.test'] })).status).toBe(200);
    expect(await month.send({ to: 'm3@rcpt.test' })).toMatchObject({
      status: 402,
      body: { code: 'monthly_quota_exceeded' },
    });
    for (const a of [unverified, suspended]) expect(await a.outbound()).toEqual([]);
    expect((await tiny.outbound()).length).toBe(2);
  });
});

describe('POST /v1/send/batch', () => {
  const batch = (a: Awaited<ReturnType<typeof gateAccount>>, prefix: string, n: number) =>
    a.api('POST', '/v1/send/batch', {
      from: `hello@${a.domain}`,
      subject: 'Hi',
      text: 'Hello',
      recipients: Array.from({ length: n }, (_, i) => ({ to: `${prefix}-${i}@rcpt.test` })),
    });

  it('refuses an unverified account; past the daily cap each recipient over it fails with daily_limit', async () => {
    const unverified = await gateAccount(env, 'batch-unverified', { verified: false });
    expect(await batch(unverified, 'bu', 2)).toMatchObject({ status: 403, body: { code: 'email_not_verified' } });
    const tiny = await gateAccount(env, 'batch-tiny', { plan: 'tiny' });
    const res = await batch(tiny, 'bt', 4);
    expect(res.body).toMatchObject({ sent: 2, failed: 2 });
    expect(res.body.results.map((r: any) => r.code ?? r.status)).toEqual([
      'sent',
      'sent',
      'daily_limit',
      'daily_limit',
    ]);
  });

  it('two concurrent batches never pass the cap together: of 8 recipients on a cap of 5, exactly 5 are accepted', async () => {
    const five = await gateAccount(env, 'batch-race', { plan: 'five' });
    const [a, b] = await Promise.all([batch(five, 'ra', 4), batch(five, 'rb', 4)]);
    expect(a.body.sent + b.body.sent).toBe(5);
    expect(a.body.failed + b.body.failed).toBe(3);
    expect(await counter(five.userId, dayKey())).toBe(5);
    expect((await five.outbound()).length).toBe(5);
  });
});

describe('scheduled sends', () => {
  it('count against the day they go out, are refused past its cap on the call, and a cancel gives the place back', async () => {
    const tiny = await gateAccount(env, 'sched-tiny', { plan: 'tiny' });
    const day = new Date(Date.now() + 2 * 86_400_000);
    const at = Date.UTC(day.getUTCFullYear(), day.getUTCMonth(), day.getUTCDate(), 12);
    const first = await tiny.send({ to: 'st1@rcpt.test', scheduledAt: at });
    expect(first.body).toMatchObject({ status: 'scheduled', scheduledAt: at });
    expect((await tiny.send({ to: 'st2@rcpt.test', scheduledAt: at })).status).toBe(200);
    const over = await tiny.send({ to: 'st3@rcpt.test', scheduledAt: at });
    expect(over).toMatchObject({ status: 429, body: { code: 'daily_limit' } });
    expect(over.body.error).toContain(new Date(at).toISOString().slice(0, 10));
    expect(await counter(tiny.userId, dayKey(new Date(at)))).toBe(2);
    // Today's cap is another day's: an immediate send still goes.
    expect((await tiny.send({ to: 'now@rcpt.test' })).status).toBe(200);
    expect((await tiny.api('DELETE', `/v1/scheduled/${first.body.id}`)).body).toMatchObject({ status: 'canceled' });
    expect(await counter(tiny.userId, dayKey(new Date(at)))).toBe(1);
    expect((await tiny.send({ to: 'st3@rcpt.test', scheduledAt: at })).status).toBe(200);
  });

  it('the release judges the account again: unverified or suspended by then, the send fails, nothing goes out, the place is given back', async () => {
    const gone = await gateAccount(env, 'sched-unverified');
    const banned = await gateAccount(env, 'sched-suspended');
    const at = Date.now() + 5000;
    const a = await gone.send({ to: 'release-u@rcpt.test', scheduledAt: at });
    const b = await banned.send({ to: 'release-s@rcpt.test', scheduledAt: at });
    await gone.setStanding({ emailVerified: false });
    await banned.setStanding({ suspendedAt: Date.now() });
    for (const [acct, res, code] of [
      [gone, a, 'email_not_verified'],
      [banned, b, 'account_suspended'],
    ] as const) {
      const row = await eventually(async () => {
        const r = (await acct.api('GET', `/v1/scheduled/${res.body.id}`)).body;
        return r.status === 'failed' ? r : undefined;
      }, 30_000);
      const [msg] = await acct.outbound();
      expect(msg).toMatchObject({ id: row.messageId, status: 'failed' });
      expect(msg!.lastError).toMatch(new RegExp(`^${code}: `));
      expect(await counter(acct.userId, dayKey(new Date(at)))).toBe(0);
    }
    expect(receivedBy(env, ['release-u@rcpt.test', 'release-s@rcpt.test'])).toEqual([]);
  });
});

describe('a domain-scoped key and sequences', () => {
  it('reaches only the sequences that send from its own domain (another is 404, as if it did not exist)', async () => {
    const owner = await gateAccount(env, 'scope-a');
    const other = `scope-b.${SERVICE}`;
    expect(
      (await owner.api('POST', '/api/domains/subdomain', { subdomain: 'scope-b' }, owner.session)).status,
    ).toBeLessThan(300);
    const sequence = (name: string, domain: string) =>
      owner.api('POST', '/api/sequences', {
        name,
        status: 'active',
        from: `news@${domain}`,
        trigger: { type: 'send' },
        steps: [{ type: 'send', subject: `From ${name}`, text: 'x' }],
      });
    expect((await sequence('Own', owner.domain)).status).toBe(201);
    expect((await sequence('Elsewhere', other)).status).toBe(201);
    const scoped = (await owner.api('POST', '/api/keys/scoped', { domainId: owner.domainId }, owner.session)).body.key;
    const refused = await owner.send({ to: 'scoped-x@rcpt.test', sequence: 'Elsewhere' }, scoped);
    expect(refused).toMatchObject({ status: 404, body: { code: 'sequence_not_found' } });
    expect(await owner.outbound()).toEqual([]);
    expect((await owner.send({ to: 'scoped-y@rcpt.test', sequence: 'Own' }, scoped)).status).toBe(200);
    expect((await owner.send({ to: 'scoped-z@rcpt.test', sequence: 'Elsewhere' })).status).toBe(200); // the account key reaches every sequence
    await env.sink.waitFor((r) => r.to.includes('scoped-z@rcpt.test') && r.raw.toString().includes('From Elsewhere'));
    await env.sink.waitFor((r) => r.to.includes('scoped-y@rcpt.test') && r.raw.toString().includes('From Own'));
    expect(env.sink.received.some((r) => r.to.includes('scoped-x@rcpt.test'))).toBe(false);
  });
});
