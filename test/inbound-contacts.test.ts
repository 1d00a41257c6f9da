import nodemailer from 'nodemailer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { broadcastHelpers } from './helpers/broadcasts.js';
import { FROM_DOMAIN, startSendingStack, type SendingStack } from './helpers/sending.js';
import { eventually } from './helpers/stack.js';

// Issue 29: "every inbound From: becomes a subscribed contact of the next `audience: all` broadcast". A
// stranger who mails the account becomes a contact that never subscribed: in no audience until subscribed.
let env: SendingStack;
beforeAll(async () => {
  const PLANS = JSON.stringify({
    free: { includedEmails: 100_000, dailySendCap: 10_000, overage: 'block', paid: false },
  });
  env = await startSendingStack({ env: { PLANS } });
});
afterAll(async () => {
  await env?.stop();
});

describe('inbound senders as contacts', () => {
  it('a stranger who mails in gets no `audience: all` broadcast until subscribed through the API', async () => {
    const h = broadcastHelpers(env);
    expect((await h.api('POST', '/api/contacts', { email: 'known@rcpt.test' })).status).toBe(201);
    const smtp = nodemailer.createTransport({
      host: '127.0.0.1',
      port: env.stack.service.smtpPort!,
      secure: false,
      ignoreTLS: true,
    });
    // Also from an address the account already has: its subscription does not change.
    await smtp.sendMail({
      from: 'Stranger <stranger@rcpt.test>',
      to: `inbox@${FROM_DOMAIN}`,
      subject: 'hello',
      text: 'add me to nothing',
    });
    await smtp.sendMail({
      from: 'Known <known@rcpt.test>',
      to: `inbox@${FROM_DOMAIN}`,
      subject: 'hello again',
      text: 'still here',
    });
    const stranger = await eventually(
      async () => (await h.api('GET', '/api/contacts?search=stranger@rcpt.test')).body[0],
    );
    expect(stranger).toMatchObject({ email: 'stranger@rcpt.test', subscribed: false, unsubscribed_at: null });
    expect(stranger.last_seen_at).toBeGreaterThan(0);
    await eventually(async () => (await h.api('GET', '/api/contacts?search=known@rcpt.test')).body[0]?.last_seen_at);
    expect((await h.api('GET', '/api/contacts?search=known@rcpt.test')).body[0]).toMatchObject({ subscribed: true });

    const first = await h.draft({ name: 'Everyone', text: 'first', audience: { type: 'all' } });
    expect((await h.api('POST', `/api/broadcasts/${first.id}/send`, {})).body).toMatchObject({
      status: 'sending',
      audienceCount: 1,
    });
    expect(await h.finished(first.id)).toMatchObject({ status: 'sent', audience_count: 1, sent_count: 1 });
    await eventually(async () => env.sink.received.some((r) => r.to.includes('known@rcpt.test')) || undefined);
    expect(env.sink.received.some((r) => r.to.includes('stranger@rcpt.test'))).toBe(false);
    // A filter naming the stranger does not reach them either.
    const named = await h.draft({ name: 'Named', audience: { type: 'filter', query: 'email = "stranger@rcpt.test"' } });
    expect((await h.api('POST', `/api/broadcasts/${named.id}/send`, {})).body).toMatchObject({ audienceCount: 0 });

    expect((await h.api('PATCH', `/api/contacts/${stranger.id}`, { subscribed: true })).body).toMatchObject({
      subscribed: true,
    });
    const second = await h.draft({ name: 'Everyone again', text: 'second', audience: { type: 'all' } });
    expect((await h.api('POST', `/api/broadcasts/${second.id}/send`, {})).body).toMatchObject({
      status: 'sending',
      audienceCount: 2,
    });
    expect(await h.finished(second.id)).toMatchObject({ status: 'sent', audience_count: 2, sent_count: 2 });
    await eventually(async () => env.sink.received.some((r) => r.to.includes('stranger@rcpt.test')) || undefined);
  });

  it('the account adding a sender to a list subscribes them; one who unsubscribed stays unsubscribed', async () => {
    const h = broadcastHelpers(env);
    const smtp = nodemailer.createTransport({
      host: '127.0.0.1',
      port: env.stack.service.smtpPort!,
      secure: false,
      ignoreTLS: true,
    });
    const gone = (await h.api('POST', '/api/contacts', { email: 'gone@rcpt.test', subscribed: false })).body;
    await smtp.sendMail({ from: 'Walk-in <walkin@rcpt.test>', to: `inbox@${FROM_DOMAIN}`, subject: 'hi', text: 'hi' });
    await eventually(async () => (await h.api('GET', '/api/contacts?search=walkin@rcpt.test')).body[0]);
    const list = (await h.api('POST', '/api/lists', { name: 'Walk-ins' })).body;
    expect(
      (
        await h.api('POST', `/api/lists/${list.id}/contacts`, {
          contacts: [{ email: 'walkin@rcpt.test' }, { email: 'gone@rcpt.test' }],
        })
      ).body,
    ).toEqual({ added: 2, created: 0 });
    expect((await h.api('GET', '/api/contacts?search=walkin@rcpt.test')).body[0]).toMatchObject({ subscribed: true });
    expect((await h.api('GET', `/api/contacts/${gone.id}`)).body).toMatchObject({
      subscribed: false,
      unsubscribed_at: expect.any(Number),
    });
  });
});
