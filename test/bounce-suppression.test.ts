import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectTemporal, type TemporalHandle } from '../temporal/client.js';
import { startSendingStack, type SendingStack } from './helpers/sending.js';
import { eventually } from './helpers/stack.js';

/**
 * Bounce classes end to end: a loopback MX refuses recipients the way providers do, and only the
 * recipient-level hard refusal (550 5.1.1) suppresses the address; a full mailbox or a spam block never does.
 * The class is on GET /api/messages/:id and on the email.bounced event.
 */
let env: SendingStack;
let t: TemporalHandle;
const ANSWERS: Record<string, { code: number; message: string }> = {
  'gone@rcpt.test': {
    code: 550,
    message: '5.1.1 <gone@rcpt.test>: Recipient address rejected: User unknown in local recipient table',
  },
  'full@rcpt.test': { code: 552, message: '5.2.2 mailbox full' },
  'filtered@rcpt.test': {
    code: 550,
    message:
      '5.7.1 Our system has detected that this message is likely unsolicited mail. To reduce the amount of spam sent to Gmail, this message has been blocked.',
  },
  'listed@rcpt.test': {
    code: 554,
    message: '5.7.1 Service unavailable; Client host [192.0.2.10] blocked using zen.spamhaus.org',
  },
};
beforeAll(async () => {
  env = await startSendingStack({ onRcpt: (a) => ANSWERS[a.toLowerCase()] });
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

describe('bounce classes and suppression', () => {
  it.each([
    ['gone@rcpt.test', 'invalid_recipient', true],
    ['full@rcpt.test', 'mailbox_full', false],
    ['filtered@rcpt.test', 'spam_block', false],
    ['listed@rcpt.test', 'reputation', false],
  ] as const)('%s bounces as %s; suppressed: %s', async (to, bounceClass, suppressed) => {
    const res = await env.send({ to });
    expect(res.status).toBe(200);
    const id: string = res.body.id;
    const view = await eventually(async () => {
      const r = await env.stack.api('GET', `/api/messages/${id}`, { token: env.key });
      return r.body.message?.status === 'bounced' ? r.body : undefined;
    });
    expect(view.message.recipients).toEqual([expect.objectContaining({ address: to, status: 'bounced', bounceClass })]);
    const bounced = view.events.find((e: any) => e.type === 'email.bounced');
    expect(bounced).toMatchObject({ recipient: to, data: { bounce: { type: 'hard', bounceClass } } });
    // The delivery run has finished (suppressions are written after the outcome): the list is final.
    await t.client.workflow.getHandle(view.message.workflow_id).result();
    const sups = (await env.stack.api('GET', '/api/contacts/suppressions', { token: env.session })).body;
    expect(sups.some((s: any) => s.email === to)).toBe(suppressed);
    // The next send to it: refused only when suppressed.
    const again = await env.send({ to });
    if (suppressed) expect(again).toMatchObject({ status: 422, body: { code: 'recipient_suppressed' } });
    else expect(again.status).toBe(200);
  });
});
