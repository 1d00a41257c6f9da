import { and, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schema } from '../db/index.js';
import { connectTemporal } from '../temporal/client.js';
import { sweepSequencesWorkflow } from '../workflows/housekeeping.js';
import { sequenceHelpers } from './helpers/sequences.js';
import { startSendingStack, type SendingStack } from './helpers/sending.js';
import { eventually } from './helpers/stack.js';

/**
 * SPEC.md, POST /v1/send `sequence`: "Enrolls the recipient when the send succeeds". Each recipient is
 * enrolled once its server accepted the message: a scheduled send when it is released, a cancelled one
 * never, a hard-bounced or suppressed recipient never.
 */
let env: SendingStack;
let h: ReturnType<typeof sequenceHelpers>;
let seqId: string;
beforeAll(async () => {
  // The recipient's MX refuses bounce-* for good.
  env = await startSendingStack({
    onRcpt: (a) => (a.startsWith('bounce') ? { code: 550, message: '5.1.1 no such user' } : undefined),
  });
  h = sequenceHelpers(env);
  seqId = (
    await h.sequence({
      name: 'After',
      trigger: { type: 'send' },
      steps: [{ type: 'send', subject: 'Welcome aboard', text: 'Hi' }],
    })
  ).id;
});
afterAll(async () => {
  await env?.stop();
});

const enrolled = async (email: string) => (await h.enrolments(seqId)).filter((e) => e.email === email);
const outboxOf = (messageId: string) =>
  env.stack.service.core.db.select().from(schema.sequenceOutbox).where(eq(schema.sequenceOutbox.messageId, messageId));
const messageOf = async (id: string) =>
  (await env.stack.api('GET', `/api/messages/${id}`, { token: env.session })).body.message;
const stateOf = async (id: string, address: string) =>
  ((await messageOf(id)).recipients as { address: string; status: string }[]).find((r) => r.address === address)
    ?.status;
/** The message row a scheduled send (ssnd_…) parks. */
const parked = async (ssnd: string) =>
  (await env.stack.service.core.db.select().from(schema.scheduledSends).where(eq(schema.scheduledSends.id, ssnd)))[0]!
    .messageId;
async function sweep() {
  const t = await connectTemporal({
    address: env.stack.service.temporalAddress,
    namespace: 'default',
    taskQueue: env.stack.config.temporal.taskQueue,
  });
  try {
    await t.client.workflow.execute(sweepSequencesWorkflow, {
      taskQueue: t.taskQueue,
      workflowId: `sweep-enrol-${Date.now()}`,
      args: [{ olderThanMs: 0 }],
    });
  } finally {
    await t.connection.close();
  }
}

describe('a send that names a sequence enrolls when it succeeds', () => {
  it('an immediate send: the recipient the server accepted is enrolled, the one it refused for good is not', async () => {
    const sent = await env.send({ to: ['glad@rcpt.test', 'bounce-1@rcpt.test'], subject: 'Order', sequence: 'After' });
    expect(sent.status).toBe(200);
    await eventually(async () => (await stateOf(sent.body.id, 'bounce-1@rcpt.test')) === 'bounced');
    const [e] = await h.ended(seqId, 'glad@rcpt.test');
    expect(e).toMatchObject({ status: 'completed', trigger: { messageId: sent.body.id } });
    await eventually(async () => h.subjects('glad@rcpt.test').includes('Welcome aboard'));
    // The refused recipient's enrolment was dropped when its bounce was recorded: nothing left to hand over.
    expect(await outboxOf(sent.body.id)).toEqual([]);
    await sweep();
    expect(await enrolled('bounce-1@rcpt.test')).toEqual([]);
    expect(h.subjects('bounce-1@rcpt.test')).toEqual([]);
  });

  it('a scheduled send enrolls when it is released, not when it is accepted', async () => {
    const sent = await env.send({
      to: 'later@rcpt.test',
      subject: 'Later',
      sequence: 'After',
      scheduledAt: Date.now() + 3000,
    });
    expect(sent.body.status).toBe('scheduled');
    const row = { id: await parked(sent.body.id) };
    const held = await outboxOf(row.id);
    expect(held).toMatchObject([{ held: true, email: 'later@rcpt.test' }]);
    await sweep(); // the sweep leaves a send that is still waiting alone
    expect(await outboxOf(row.id)).toMatchObject([{ held: true }]);
    expect(await enrolled('later@rcpt.test')).toEqual([]);
    expect((await messageOf(row.id)).status).toBe('scheduled');
    // Released, delivered, then enrolled.
    const [e] = await h.ended(seqId, 'later@rcpt.test');
    expect(e.trigger.messageId).toBe(row.id);
    // The step's own send is captured once its delivery ends, which may be just after the enrolment ends.
    await eventually(async () => h.subjects('later@rcpt.test').length >= 2);
    expect(h.subjects('later@rcpt.test')).toEqual(['Later', 'Welcome aboard']);
  });

  it('a cancelled scheduled send never enrolls', async () => {
    const sent = await env.send({
      to: 'cancelled@rcpt.test',
      subject: 'Never',
      sequence: 'After',
      scheduledAt: Date.now() + 3_600_000,
    });
    const row = { id: await parked(sent.body.id) };
    expect((await env.stack.api('DELETE', `/v1/scheduled/${sent.body.id}`, { token: env.key })).body).toMatchObject({
      ok: true,
      status: 'canceled',
    });
    await sweep();
    expect(await outboxOf(row.id)).toEqual([]);
    expect(await enrolled('cancelled@rcpt.test')).toEqual([]);
  });

  it('a suppressed recipient is refused on the call and never enrolled', async () => {
    await env.stack.api('POST', '/api/contacts/suppressions', {
      token: env.session,
      body: { email: 'blocked@rcpt.test' },
    });
    const res = await env.send({ to: 'blocked@rcpt.test', sequence: 'After' });
    expect(res).toMatchObject({ status: 422, body: { code: 'recipient_suppressed' } });
    const rows = await env.stack.service.core.db
      .select()
      .from(schema.sequenceOutbox)
      .where(and(eq(schema.sequenceOutbox.email, 'blocked@rcpt.test')));
    expect(rows).toEqual([]);
    await sweep();
    expect(await enrolled('blocked@rcpt.test')).toEqual([]);
  });

  it('a held enrolment whose settle was lost (a crash after the outcome) is settled by the sweep from the message row', async () => {
    const sent = await env.send({ to: 'lost@rcpt.test', subject: 'Lost' });
    await eventually(async () => (await messageOf(sent.body.id)).status === 'sent');
    const userId = await ownerId();
    // The send made the recipient a contact.
    const contact = await eventually(
      async () =>
        (
          await env.stack.service.core.db
            .select()
            .from(schema.contacts)
            .where(and(eq(schema.contacts.userId, userId), eq(schema.contacts.email, 'lost@rcpt.test')))
        )[0],
    );
    // What a crash between the outcome write and its settle leaves behind: the recipient's row still held.
    await env.stack.service.core.db.insert(schema.sequenceOutbox).values({
      id: 'sqo_lostlostlostlostlostlost',
      userId,
      kind: 'send',
      createdAt: Date.now() - 60_000,
      messageId: sent.body.id,
      email: 'lost@rcpt.test',
      held: true,
      data: {
        start: {
          sequenceId: seqId,
          version: 1,
          userId,
          contactId: contact.id,
          email: 'lost@rcpt.test',
          input: {},
          trigger: {
            kind: 'send',
            key: sent.body.id,
            at: Date.now(),
            data: { subject: 'Lost', messageId: sent.body.id },
          },
        },
      },
    });
    await sweep();
    const [e] = await h.ended(seqId, 'lost@rcpt.test');
    expect(e).toMatchObject({ status: 'completed', trigger: { messageId: sent.body.id } });
    expect(await outboxOf(sent.body.id)).toEqual([]);
  });
});

async function ownerId(): Promise<string> {
  const [u] = await env.stack.service.core.db
    .select({ id: schema.users.id })
    .from(schema.users)
    .where(eq(schema.users.email, 'sender@example.com'));
  return u!.id;
}
