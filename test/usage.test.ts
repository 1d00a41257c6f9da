import { eq } from 'drizzle-orm';
import nodemailer from 'nodemailer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schema } from '../db/index.js';
import { FROM_DOMAIN, SERVICE, startSendingStack, type SendingStack } from './helpers/sending.js';
import { eventually } from './helpers/stack.js';

const PLANS = {
  free: { includedEmails: 3, dailySendCap: null, overage: 'block', paid: false },
  pro: { includedEmails: 1, dailySendCap: null, overage: 'metered', paid: true },
  unlimited: { includedEmails: null, dailySendCap: null, overage: 'metered', paid: true },
};
let env: SendingStack;
beforeAll(async () => {
  env = await startSendingStack({ env: { PLANS: JSON.stringify(PLANS) } });
});
afterAll(async () => {
  await env?.stop();
});

const usage = async (token = env.session) => (await env.stack.api('GET', '/api/billing/usage', { token })).body;
/** One inbound message over SMTP to `to` (addresses at a verified domain of the account). */
const receive = (to: string[]) =>
  nodemailer
    .createTransport({ host: '127.0.0.1', port: env.stack.service.smtpPort!, secure: false, ignoreTLS: true })
    .sendMail({ from: 'someone@far.example', to, subject: 'inbound', text: 'hello' });

/** A verified account on `plan` with a claimed sending domain `<label>.<SERVICE>`; answers its session and key. */
async function accountOn(plan: string, label: string) {
  const s = (
    await env.stack.api('POST', '/api/auth/signup', {
      body: { email: `${label}@example.com`, password: `${label} password` },
    })
  ).body;
  await env.stack.service.core.db
    .update(schema.users)
    .set({ emailVerified: true, plan })
    .where(eq(schema.users.id, s.user.id));
  await env.stack.api('POST', '/api/domains/subdomain', { token: s.token, body: { subdomain: label } });
  return {
    session: s.token as string,
    key: (await env.stack.api('GET', '/api/keys', { token: s.token })).body.key as string,
  };
}

describe('the monthly bucket (inbound and outbound share it)', () => {
  it('an inbound message counts 1; at the limit usage shows the block and sends are refused with its code', async () => {
    expect(await usage()).toMatchObject({
      plan: 'free',
      emails: { used: 0, included: 3 },
      meteringEnabled: false,
      meters: [],
      overage: { over: false, metered: false, blocked: false, status: null, code: null },
    });
    // One message to two addresses of the domain is one inbound message.
    await receive([`a@${FROM_DOMAIN}`, `b@${FROM_DOMAIN}`]);
    await eventually(async () => (await usage()).emails.used === 1);
    expect((await env.send({ to: 'one@rcpt.test' })).status).toBe(200);
    expect((await env.send({ to: 'two@rcpt.test' })).status).toBe(200);

    const blocked = await usage();
    expect(blocked).toMatchObject({
      emails: { used: 3, included: 3 },
      overage: { over: true, metered: false, blocked: true, status: 'failed', code: 'monthly_quota_exceeded' },
    });
    const refused = await env.send({ to: 'three@rcpt.test' });
    expect(refused).toMatchObject({ status: 402, body: { code: blocked.overage.code } });
    const batch = await env.stack.api('POST', '/v1/send/batch', {
      token: env.key,
      body: { from: `hello@${FROM_DOMAIN}`, subject: 's', text: 't', recipients: [{ to: 'four@rcpt.test' }] },
    });
    expect(batch.status).toBe(200);
    expect(batch.body.results[0]).toMatchObject({ status: 'failed', code: blocked.overage.code });

    // Only sending is blocked: inbound mail is still received, and counted.
    await receive([`c@${FROM_DOMAIN}`]);
    await eventually(async () => (await usage()).emails.used === 4);
    expect(env.sink.received.filter((r) => r.to.some((t) => /^(three|four)@/.test(t)))).toEqual([]);
  });

  it('a metered plan goes over without a block', async () => {
    const pro = await accountOn('pro', 'metered');
    for (const to of ['m1@rcpt.test', 'm2@rcpt.test']) {
      expect(
        (
          await env.stack.api('POST', '/v1/send', {
            token: pro.key,
            body: { from: `x@metered.${SERVICE}`, to, subject: 's', text: 't' },
          })
        ).status,
      ).toBe(200);
    }
    expect(await usage(pro.session)).toMatchObject({
      plan: 'pro',
      emails: { used: 2, included: 1 },
      meteringEnabled: true,
      meters: ['emails'],
      overage: { over: true, metered: true, blocked: false, status: 'ok', code: null },
    });
  });

  it('the unlimited plan: emails.included is null and nothing is ever over', async () => {
    const un = await accountOn('unlimited', 'boundless');
    const res = await env.stack.api('POST', '/v1/send/batch', {
      token: un.key,
      body: {
        from: `x@boundless.${SERVICE}`,
        subject: 's',
        text: 't',
        recipients: Array.from({ length: 5 }, (_, i) => ({ to: `u${i}@rcpt.test` })),
      },
    });
    expect(res.body).toMatchObject({ sent: 5, failed: 0 });
    await receive([`in@boundless.${SERVICE}`]);
    await eventually(async () => (await usage(un.session)).emails.used === 6);
    expect(await usage(un.session)).toMatchObject({
      plan: 'unlimited',
      emails: { used: 6, included: null },
      overage: { over: false, metered: false, blocked: false, status: null, code: null },
    });
  });
});
