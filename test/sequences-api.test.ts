import { eq } from 'drizzle-orm';
import { simpleParser } from 'mailparser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schema } from '../db/index.js';
import { connectTemporal } from '../temporal/client.js';
import { sweepSequencesWorkflow } from '../workflows/housekeeping.js';
import { sequenceHelpers } from './helpers/sequences.js';
import { FROM_DOMAIN, SERVICE, startSendingStack, type SendingStack } from './helpers/sending.js';
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

describe('POST /v1/send with a sequence', () => {
  it('answers unknown, inactive and badly typed input on the call, and enrolls the recipient after an accepted send', async () => {
    const draft = await h.api('POST', '/api/sequences', {
      name: 'Drip',
      from: `Acme <hello@${FROM_DOMAIN}>`,
      input: { plan: 'string', seats: 'number' },
      trigger: { type: 'send' },
      steps: [
        {
          type: 'send',
          subject: 'Re: {{trigger.subject}}',
          text: 'Plan {{input.plan}}, {{input.seats}} seats, after {{trigger.messageId}} from {{trigger.from}}',
        },
      ],
    });
    expect(draft.status).toBe(201);
    expect(draft.body).toMatchObject({ status: 'draft', version: 1 });
    expect((await env.send({ to: 'drip@rcpt.test', sequence: 'Nope' })).body).toMatchObject({
      code: 'sequence_not_found',
    });
    expect((await env.send({ to: 'drip@rcpt.test', sequence: 'Nope' })).status).toBe(404);
    const inactive = await env.send({ to: 'drip@rcpt.test', sequence: 'Drip' });
    expect(inactive).toMatchObject({ status: 409, body: { code: 'sequence_not_active' } });
    expect((await h.api('PATCH', `/api/sequences/${draft.body.id}`, { status: 'active' })).body).toMatchObject({
      status: 'active',
      version: 1,
    });
    const bad = await env.send({ to: 'drip@rcpt.test', sequence: 'Drip', sequenceInput: { seats: 'three' } });
    expect(bad).toMatchObject({ status: 400, body: { code: 'invalid_sequence_input' } });
    expect(bad.body.error).toContain('seats');
    const unknown = await env.send({ to: 'drip@rcpt.test', sequence: draft.body.id, sequenceInput: { colour: 'red' } });
    expect(unknown).toMatchObject({ status: 400, body: { code: 'invalid_sequence_input' } });
    expect(unknown.body.error).toContain('colour');
    expect(env.sink.received.filter((r) => r.to.includes('drip@rcpt.test'))).toHaveLength(0);

    const sent = await env.send({
      to: 'drip@rcpt.test',
      subject: 'Your order',
      sequence: 'Drip',
      templateData: { plan: 'free', other: 'x' },
      metadata: { plan: 'pro' },
      sequenceInput: { seats: 3 },
    });
    expect(sent.status).toBe(200);
    const [e] = await h.ended(draft.body.id, 'drip@rcpt.test');
    expect(e).toMatchObject({
      status: 'completed',
      input: { plan: 'pro', seats: 3 },
      trigger: { subject: 'Your order', messageId: sent.body.id },
    });
    await eventually(async () => h.subjects('drip@rcpt.test').length === 2);
    const raw = env.sink.received
      .filter((r) => r.to.includes('drip@rcpt.test'))
      .find((r) => r.raw.toString().includes('Re: Your order'))!.raw;
    expect((await simpleParser(raw)).text).toContain(
      `Plan pro, 3 seats, after ${sent.body.id} from "Acme" <hello@${FROM_DOMAIN}>`,
    );
  });

  it('editing an active sequence adds a version; a running enrolment keeps its own', async () => {
    const seq = await h.sequence({
      name: 'Versioned',
      trigger: { type: 'event', event: 'v-start' },
      steps: [
        { type: 'wait', duration: '1500ms' },
        { type: 'send', subject: 'Version one', text: '1' },
      ],
    });
    await h.contact('v1@rcpt.test');
    await h.event({ name: 'v-start', email: 'v1@rcpt.test' });
    await eventually(async () => (await h.enrolments(seq.id)).length === 1);
    const edited = await h.api('PATCH', `/api/sequences/${seq.id}`, {
      steps: [{ type: 'send', subject: 'Version two', text: '2' }],
    });
    expect(edited.body).toMatchObject({
      version: 2,
      status: 'active',
      steps: [{ type: 'send', subject: 'Version two' }],
    });
    await h.contact('v2@rcpt.test');
    await h.event({ name: 'v-start', email: 'v2@rcpt.test' });
    const [one] = await h.ended(seq.id, 'v1@rcpt.test');
    const [two] = await h.ended(seq.id, 'v2@rcpt.test');
    expect([one.version, two.version]).toEqual([1, 2]);
    await eventually(async () => h.subjects('v1@rcpt.test').length === 1 && h.subjects('v2@rcpt.test').length === 1);
    expect(h.subjects('v1@rcpt.test')).toEqual(['Version one']);
    expect(h.subjects('v2@rcpt.test')).toEqual(['Version two']);
  });

  it('an enrolment can be inspected live and cancelled', async () => {
    const seq = await h.sequence({
      name: 'Cancel me',
      trigger: { type: 'event', event: 'c-start' },
      steps: [
        { type: 'wait_for_event', event: 'never', timeout: '1h' },
        { type: 'send', subject: 'Never', text: 'n' },
      ],
    });
    await h.contact('cancel@rcpt.test');
    await h.event({ name: 'c-start', email: 'cancel@rcpt.test' });
    const live = await eventually(async () => {
      const [e] = await h.enrolments(seq.id);
      const d = e && (await h.api('GET', `/api/enrolments/${e.id}`)).body;
      return d?.live ? d : undefined;
    });
    expect(live).toMatchObject({ status: 'running', currentStep: 0, waitingFor: 'never', live: true });
    expect(live.waitUntil).toBeGreaterThan(Date.now() + 3_000_000);
    const canceled = await h.api('POST', `/api/enrolments/${live.id}/cancel`);
    expect(canceled.body).toMatchObject({ status: 'canceled', exitReason: 'canceled' });
    expect((await h.api('POST', `/api/enrolments/${live.id}/cancel`)).status).toBe(409);
    expect((await h.api('GET', `/api/enrolments/${live.id}`)).body).toMatchObject({ status: 'canceled', live: false });
  });
});

describe('application events', () => {
  it('checks names, reserved prefixes and the target; name wins over event', async () => {
    const post = (body: unknown) => h.api('POST', '/v1/events', body);
    for (const name of [
      'svc.thing',
      'svc:thing',
      'email.opened',
      'mailkite.x',
      '-start',
      'a'.repeat(65),
      'has space',
    ]) {
      const r = await post({ name, email: 'x@rcpt.test' });
      expect(r.status, name).toBe(400);
      expect(r.body.code).toBe('validation_error');
    }
    expect((await post({ email: 'x@rcpt.test' })).status).toBe(400);
    const both = await post({ name: 'ok', email: 'x@rcpt.test', contactId: 'ctc_aaaaaaaaaaaaaaaaaaaaaaaa' });
    expect(both.status).toBe(400);
    expect(both.body.error).toContain('exactly one');
    expect((await post({ name: 'ok', contactId: 'ctc_aaaaaaaaaaaaaaaaaaaaaaaa' })).status).toBe(404);
    const alias = await post({ name: 'wins', event: 'loses', email: 'Stranger@RCPT.test', payload: { a: 1 } });
    expect(alias).toMatchObject({ status: 202, body: { name: 'wins', email: 'stranger@rcpt.test', duplicate: false } });
    // An unknown address is recorded, and no contact is made for it.
    const contacts = (await h.api('GET', '/api/contacts?search=stranger')).body;
    expect(contacts).toEqual([]);
    const [stored] = (await h.api('GET', '/v1/events?email=stranger@rcpt.test')).body.events;
    expect(stored).toMatchObject({
      id: alias.body.id,
      name: 'wins',
      contactId: null,
      payload: { a: 1 },
      dedupeKey: null,
    });
  });

  it('lists with filters and paging, and names by last seen then declared names alphabetically', async () => {
    const c = await h.contact('lister@rcpt.test');
    await h.sequence({
      name: 'Zeta user',
      trigger: { type: 'event', event: 'zz-declared' },
      steps: [{ type: 'wait_for_event', event: 'aa-declared', timeout: '1s' }],
    });
    for (let i = 0; i < 5; i++) await h.event({ name: 'page-me', contactId: c.id, payload: { i } });
    await h.event({ name: 'seen-last', email: 'lister@rcpt.test' });
    const first = (await h.api('GET', '/v1/events?name=page-me&limit=2')).body.events;
    expect(first.map((e: any) => e.payload.i)).toEqual([4, 3]);
    const next = (await h.api('GET', `/v1/events?name=page-me&limit=2&before=${first[1].id}`)).body.events;
    expect(next.map((e: any) => e.payload.i)).toEqual([2, 1]);
    expect(next[0]).toMatchObject({ email: 'lister@rcpt.test', contactId: c.id });
    const names = (await h.api('GET', '/v1/events/names')).body.events;
    expect(names[0]).toMatchObject({ name: 'seen-last', count: 1, usedBy: [] });
    expect(names[1]).toMatchObject({ name: 'page-me', count: 5 });
    expect(names.find((n: any) => n.name === 'activated')).toBeUndefined();
    const declared = names.filter((n: any) => n.count === 0);
    expect(declared.map((n: any) => n.name)).toEqual([...declared.map((n: any) => n.name)].sort());
    expect(declared.find((n: any) => n.name === 'aa-declared')).toEqual({
      name: 'aa-declared',
      count: 0,
      lastSeenAt: null,
      usedBy: ['Zeta user'],
    });
    expect(declared.find((n: any) => n.name === 'zz-declared')).toMatchObject({ usedBy: ['Zeta user'] });
  });

  it('an event whose hand-over was lost (the process died after the commit) is swept to its enrolment', async () => {
    const seq = await h.sequence({
      name: 'Swept',
      trigger: { type: 'event', event: 'swept' },
      steps: [{ type: 'send', subject: 'Swept', text: 's' }],
    });
    const c = await h.contact('swept@rcpt.test');
    const db = env.stack.service.core.db;
    // What POST /v1/events commits, without the in-process hand-over that a crash would lose.
    const at = Date.now() - 60_000;
    await db.insert(schema.appEvents).values({
      id: 'cev_sweptsweptsweptsweptswep',
      userId: await userOf(),
      name: 'swept',
      email: c.email,
      contactId: c.id,
      createdAt: at,
    });
    await db.insert(schema.sequenceOutbox).values({
      id: 'sqo_sweptsweptsweptsweptswep',
      userId: await userOf(),
      kind: 'event',
      createdAt: at,
      data: {
        eventId: 'cev_sweptsweptsweptsweptswep',
        name: 'swept',
        contactId: c.id,
        email: c.email,
        payload: null,
        createdAt: at,
      },
    });
    const t = await connectTemporal({
      address: env.stack.service.temporalAddress,
      namespace: 'default',
      taskQueue: env.stack.config.temporal.taskQueue,
    });
    try {
      const r = await t.client.workflow.execute(sweepSequencesWorkflow, {
        taskQueue: t.taskQueue,
        workflowId: `sweep-test-${Date.now()}`,
        args: [{ olderThanMs: 30_000 }],
      });
      expect(r.handed).toBe(1);
    } finally {
      await t.connection.close();
    }
    const [e] = await h.ended(seq.id, 'swept@rcpt.test');
    expect(e.status).toBe('completed');
    expect(
      await db.select().from(schema.sequenceOutbox).where(eq(schema.sequenceOutbox.id, 'sqo_sweptsweptsweptsweptswep')),
    ).toEqual([]);
    await eventually(async () => h.subjects('swept@rcpt.test').length === 1);
  });
});

describe('tenancy', () => {
  it('another account cannot see or change sequences, enrolments or events', async () => {
    const seq = await h.sequence({
      name: 'Mine',
      trigger: { type: 'event', event: 'mine' },
      steps: [{ type: 'wait', duration: '1h' }],
    });
    const c = await h.contact('mine@rcpt.test');
    const ev = await h.event({ name: 'mine', contactId: c.id });
    const [enr] = await eventually(async () => {
      const l = await h.enrolments(seq.id);
      return l.length ? l : undefined;
    });
    // A verified account with a verified sending domain of its own: refused for tenancy, not for being unverified.
    const other = (
      await env.stack.api('POST', '/api/auth/signup', {
        body: { email: 'other@example.com', password: 'other password' },
      })
    ).body;
    await env.stack.service.core.db
      .update(schema.users)
      .set({ emailVerified: true })
      .where(eq(schema.users.id, other.user.id));
    expect(
      (await env.stack.api('POST', '/api/domains/subdomain', { token: other.token, body: { subdomain: 'other' } }))
        .status,
    ).toBe(201);
    const otherFrom = `x@other.${SERVICE}`;
    const key = (await env.stack.api('GET', '/api/keys', { token: other.token })).body.key;
    const o = (method: string, path: string, body?: unknown) => env.stack.api(method, path, { token: key, body });
    expect((await o('GET', `/api/sequences/${seq.id}`)).status).toBe(404);
    expect((await o('GET', '/api/sequences/Mine')).status).toBe(404);
    expect((await o('PATCH', `/api/sequences/${seq.id}`, { status: 'paused' })).status).toBe(404);
    expect((await o('DELETE', `/api/sequences/${seq.id}`)).status).toBe(404);
    expect((await o('GET', `/api/sequences/${seq.id}/enrolments`)).status).toBe(404);
    expect((await o('GET', `/api/enrolments/${enr.id}`)).status).toBe(404);
    expect((await o('POST', `/api/enrolments/${enr.id}/cancel`)).status).toBe(404);
    expect((await o('GET', '/api/sequences')).body).toEqual([]);
    expect((await o('GET', '/v1/events')).body.events).toEqual([]);
    expect((await o('GET', '/v1/events/names')).body.events).toEqual([]);
    expect((await o('GET', `/v1/events?before=${ev.id}`)).status).toBe(404);
    expect((await o('POST', '/v1/events', { name: 'mine', contactId: c.id })).status).toBe(404);
    const sendAs = (body: Record<string, unknown>) =>
      o('POST', '/v1/send', { from: otherFrom, to: 'cross@rcpt.test', subject: 's', text: 't', ...body });
    expect((await sendAs({})).status).toBe(200); // the other account sends: what follows is refused for naming the sequence
    expect(await sendAs({ sequence: 'Mine' })).toMatchObject({ status: 404, body: { code: 'sequence_not_found' } });
    expect(await sendAs({ sequence: seq.id })).toMatchObject({ status: 404, body: { code: 'sequence_not_found' } });
    expect([403, 404]).toContain(
      (
        await o('POST', '/v1/send', {
          from: `x@${FROM_DOMAIN}`,
          to: 'cross@rcpt.test',
          subject: 's',
          text: 't',
          sequence: 'Mine',
        })
      ).status,
    );
    expect((await h.enrolments(seq.id)).map((e) => e.email)).toEqual(['mine@rcpt.test']);
    // The owner still sees it running, untouched.
    expect((await h.api('GET', `/api/enrolments/${enr.id}`)).body).toMatchObject({ status: 'running' });
    expect((await h.api('GET', `/api/sequences/${seq.id}`)).body).toMatchObject({ status: 'active' });
  });
});

async function userOf(): Promise<string> {
  const [u] = await env.stack.service.core.db
    .select()
    .from(schema.users)
    .where(eq(schema.users.email, 'sender@example.com'));
  return u!.id;
}
