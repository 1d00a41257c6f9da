import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sequenceHelpers } from './helpers/sequences.js';
import { startSendingStack, type SendingStack } from './helpers/sending.js';
import { eventually } from './helpers/stack.js';

let env: SendingStack;
let h: ReturnType<typeof sequenceHelpers>;
beforeAll(async () => {
  env = await startSendingStack();
  h = sequenceHelpers(env);
});
afterAll(async () => {
  await env?.stop();
});

/** "send welcome → wait_for_event activated up to `timeout` → if not, send reminder" (the example). */
const onboarding = (name: string, trigger: string, timeout = '3s') =>
  h.sequence({
    name,
    trigger: { type: 'event', event: trigger },
    steps: [
      { type: 'send', subject: 'Welcome {{first_name}}', text: 'Hi {{name}}, plan {{trigger.plan}}' },
      { type: 'wait_for_event', event: 'activated', timeout, onArrived: 'exit' },
      { type: 'send', subject: 'Reminder', text: 'You have not activated yet' },
    ],
  });

describe('sequences with wait_for_event', () => {
  it('sends the reminder when no event comes, and not when the event comes in time', async () => {
    const seq = await onboarding('Onboarding', 'signup');
    await h.contact('late@rcpt.test', 'Lena Late');
    await h.contact('quick@rcpt.test', 'Quinn Quick');
    const started = Date.now();
    await h.event({ name: 'signup', email: 'late@rcpt.test', payload: { plan: 'pro' } });
    await h.event({ event: 'signup', email: 'quick@rcpt.test' });

    await eventually(async () => h.subjects('quick@rcpt.test').includes('Welcome Quinn'));
    await h.event({ name: 'activated', email: 'quick@rcpt.test' });
    const [quick] = await h.ended(seq.id, 'quick@rcpt.test');
    expect(quick).toMatchObject({ status: 'completed', version: 1 });
    expect(quick.steps.map((s: any) => [s.type, s.outcome])).toEqual([
      ['send', 'sent'],
      ['wait_for_event', 'arrived'],
    ]);
    expect(h.subjects('quick@rcpt.test')).toEqual(['Welcome Quinn']);

    const [late] = await h.ended(seq.id, 'late@rcpt.test');
    expect(late.steps.map((s: any) => [s.type, s.outcome])).toEqual([
      ['send', 'sent'],
      ['wait_for_event', 'timed_out'],
      ['send', 'sent'],
    ]);
    expect(late.steps[1].at - late.steps[1].startedAt).toBeGreaterThanOrEqual(2900);
    expect(Date.now() - started).toBeGreaterThanOrEqual(3000);
    await eventually(async () => h.subjects('late@rcpt.test').length === 2);
    expect(h.subjects('late@rcpt.test')).toEqual(['Welcome Lena', 'Reminder']);
    const welcome = env.sink.received.find((r) => r.to.includes('late@rcpt.test'))!.raw.toString();
    expect(welcome).toContain('Hi Lena Late, plan pro');
    expect(welcome).toMatch(/List-Unsubscribe:\s+<http/);
  });

  it('an event posted after the trigger but before the wait began counts', async () => {
    const seq = await h.sequence({
      name: 'Early',
      trigger: { type: 'event', event: 'early-signup' },
      steps: [
        { type: 'wait', duration: '1s' },
        { type: 'wait_for_event', event: 'activated', match: { source: 'app' }, timeout: '20s', onArrived: 'exit' },
        { type: 'send', subject: 'Reminder', text: 'r' },
      ],
    });
    await h.contact('early@rcpt.test');
    await h.event({ name: 'early-signup', email: 'early@rcpt.test' });
    await h.event({ name: 'activated', email: 'early@rcpt.test', payload: { source: 'other' } }); // does not match
    await h.event({ name: 'activated', email: 'early@rcpt.test', payload: { source: 'app' } });
    const [e] = await h.ended(seq.id, 'early@rcpt.test', 1, 15_000);
    expect(e.steps.map((s: any) => s.outcome)).toEqual(['waited', 'arrived']);
    expect(e.steps[1].at - e.steps[1].startedAt).toBeLessThan(5000);
    expect(h.subjects('early@rcpt.test')).toEqual([]);
  });

  it('an event at the moment of the timeout is decided once: arrived without reminder, or timed out with exactly one', async () => {
    const seq = await h.sequence({
      name: 'Race',
      trigger: { type: 'event', event: 'race-start' },
      steps: [
        { type: 'wait_for_event', event: 'activated', timeout: '2s', onArrived: 'exit' },
        { type: 'send', subject: 'Race reminder', text: 'r' },
      ],
    });
    const N = 24;
    const emails = Array.from({ length: N }, (_, i) => `race-${i}@rcpt.test`);
    for (const e of emails) await h.contact(e);
    await Promise.all(emails.map((email) => h.event({ name: 'race-start', email })));
    // Aim each event at its own enrolment's deadline (from the live stateQuery), spread from 200 ms before to 1.3 s after (a signal takes a moment to arrive).
    await Promise.all(
      emails.map(async (email, i) => {
        const live = await eventually(async () => {
          const list = await h.enrolments(seq.id);
          const mine = list.find((x) => x.email === email);
          if (!mine) return undefined;
          const detail = (await h.api('GET', `/api/enrolments/${mine.id}`)).body;
          return detail.live && detail.waitUntil ? detail : undefined;
        });
        expect(live).toMatchObject({ currentStep: 0, waitingFor: 'activated', status: 'running' });
        const at = live.waitUntil - 200 + (i * 1500) / N;
        await new Promise((r) => setTimeout(r, Math.max(0, at - Date.now())));
        await h.event({ name: 'activated', email });
      }),
    );
    const outcomes = new Map<string, string>();
    for (const email of emails) {
      const [e] = await h.ended(seq.id, email);
      const waits = e.steps.filter((s: any) => s.type === 'wait_for_event');
      expect(waits).toHaveLength(1);
      outcomes.set(email, waits[0].outcome);
    }
    // The decision and the mail agree for every enrolment, once the reminders that were owed went out.
    await eventually(async () =>
      emails.every((email) => h.subjects(email).length === (outcomes.get(email) === 'timed_out' ? 1 : 0)),
    );
    for (const email of emails)
      expect(h.subjects(email)).toEqual(outcomes.get(email) === 'timed_out' ? ['Race reminder'] : []);
    expect([...outcomes.values()].every((o) => o === 'arrived' || o === 'timed_out')).toBe(true);
  });

  it('exits at once when the contact unsubscribes or is suppressed during a wait (and only that contact)', async () => {
    const seq = await onboarding('Unsub', 'unsub-signup', '8s');
    const c = await h.contact('unsub@rcpt.test', 'Una');
    await h.contact('supp@rcpt.test', 'Sue');
    await h.contact('stays@rcpt.test', 'Stan');
    for (const email of ['unsub@rcpt.test', 'supp@rcpt.test', 'stays@rcpt.test'])
      await h.event({ name: 'unsub-signup', email });
    await eventually(
      async () => h.subjects('unsub@rcpt.test').length === 1 && h.subjects('supp@rcpt.test').length === 1,
    );
    const changedAt = Date.now();
    await h.api('PATCH', `/api/contacts/${c.id}`, { subscribed: false });
    expect(
      (
        await env.stack.api('POST', '/api/contacts/suppressions', {
          token: env.session,
          body: { email: 'supp@rcpt.test' },
        })
      ).status,
    ).toBeLessThan(300);
    const [e] = await h.ended(seq.id, 'unsub@rcpt.test');
    expect(e).toMatchObject({ status: 'exited', exitReason: 'unsubscribed' });
    const [s] = await h.ended(seq.id, 'supp@rcpt.test');
    expect(s).toMatchObject({ status: 'exited', exitReason: 'suppressed' });
    // They exit in the middle of the 8 s wait (contactChangedSignal), not at its end.
    expect(Math.max(e.endedAt, s.endedAt) - changedAt).toBeLessThan(5000);
    expect(e.steps.map((x: any) => x.outcome)).toEqual(['sent']);
    const [kept] = await h.ended(seq.id, 'stays@rcpt.test');
    expect(kept).toMatchObject({ status: 'completed', exitReason: null });
    expect(h.subjects('unsub@rcpt.test')).toEqual(['Welcome Una']);
    expect(h.subjects('supp@rcpt.test')).toEqual(['Welcome Sue']);
    await eventually(async () => h.subjects('stays@rcpt.test').length === 2);
  });
});

describe('{{event.*}} in a step', () => {
  it('is the payload of the event that started the enrolment, then of the event a wait received', async () => {
    const seq = await h.sequence({
      name: 'Event tags',
      trigger: { type: 'event', event: 'plan-chosen' },
      steps: [
        { type: 'send', subject: 'Plan {{event.plan}}', text: 'You chose {{event.plan}} for {{event.seats}} seats' },
        { type: 'wait_for_event', event: 'plan-upgraded', timeout: '20s', onTimeout: 'exit' },
        { type: 'send', subject: 'Upgraded to {{event.plan}}', text: 'Now on {{event.plan}}' },
      ],
    });
    await h.contact('tags@rcpt.test');
    await h.event({ name: 'plan-chosen', email: 'tags@rcpt.test', payload: { plan: 'starter', seats: 3 } });
    await eventually(async () => h.subjects('tags@rcpt.test').length === 1);
    expect(h.subjects('tags@rcpt.test')).toEqual(['Plan starter']);
    expect(env.sink.received.find((r) => r.to.includes('tags@rcpt.test'))!.raw.toString()).toContain(
      'You chose starter for 3 seats',
    );
    await h.event({ name: 'plan-upgraded', email: 'tags@rcpt.test', payload: { plan: 'business' } });
    const [e] = await h.ended(seq.id, 'tags@rcpt.test');
    expect(e.steps.map((s: any) => s.outcome)).toEqual(['sent', 'arrived', 'sent']);
    await eventually(async () => h.subjects('tags@rcpt.test').length === 2);
    expect(h.subjects('tags@rcpt.test')).toEqual(['Plan starter', 'Upgraded to business']);
  });
});

describe('enrolment once', () => {
  it('a duplicate dedupeKey answers the original and enrolls once', async () => {
    const seq = await h.sequence({
      name: 'Trial',
      trigger: { type: 'event', event: 'trial' },
      steps: [{ type: 'send', subject: 'Trial', text: 't' }],
    });
    await h.contact('dedupe@rcpt.test');
    const first = await h.event({ name: 'trial', email: 'Dedupe@rcpt.test', dedupeKey: 'order-1' });
    expect(first).toMatchObject({ object: 'event', name: 'trial', email: 'dedupe@rcpt.test', duplicate: false });
    expect(first.id).toMatch(/^cev_/);
    await h.ended(seq.id, 'dedupe@rcpt.test');
    const again = await h.event({
      name: 'trial',
      email: 'dedupe@rcpt.test',
      dedupeKey: 'order-1',
      payload: { other: 1 },
    });
    expect(again).toEqual({ ...first, duplicate: true });
    const events = (await h.api('GET', '/v1/events?name=trial')).body.events;
    expect(events).toHaveLength(1);
    // Nothing new is handed to Temporal for the duplicate: still one enrolment and one mail.
    await env.stack.service.core.dispatcher.drain();
    expect(await h.enrolments(seq.id)).toHaveLength(1);
    await eventually(async () => h.subjects('dedupe@rcpt.test').length > 0);
    expect(h.subjects('dedupe@rcpt.test')).toEqual(['Trial']);
  });

  it('two concurrent triggers for one contact make one enrolment', async () => {
    const seq = await h.sequence({
      name: 'Twice',
      trigger: { type: 'event', event: 'twice' },
      steps: [
        { type: 'wait', duration: '1500ms' },
        { type: 'send', subject: 'Once', text: 'o' },
      ],
    });
    await h.contact('twice@rcpt.test');
    const [a, b] = await Promise.all([
      h.event({ name: 'twice', email: 'twice@rcpt.test' }),
      h.event({ name: 'twice', email: 'twice@rcpt.test' }),
    ]);
    expect(a.id).not.toBe(b.id);
    const [e] = await h.ended(seq.id, 'twice@rcpt.test');
    expect(e.status).toBe('completed');
    expect(await h.enrolments(seq.id)).toHaveLength(1);
    await eventually(async () => h.subjects('twice@rcpt.test').length === 1);
    expect(h.subjects('twice@rcpt.test')).toEqual(['Once']);
  });
});
