import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { schema } from '../db/index.js';
import { startWorker } from '../worker.js';
import { startSendingStack, type SendingStack } from './helpers/sending.js';
import { eventually } from './helpers/stack.js';

let env: SendingStack;
beforeAll(async () => {
  env = await startSendingStack();
});
afterAll(async () => {
  await env?.stop();
});

const to = (addr: string) => (r: { to: string[] }) => r.to.includes(addr);
const status = async (id: string) =>
  (await env.stack.api('GET', `/v1/scheduled/${id}`, { token: env.key })).body.status;

describe('scheduled sends', () => {
  it('parks the message and fires within a second or two of its time', async () => {
    const at = Date.now() + 2000;
    const res = await env.send({ to: 'later@rcpt.test', scheduledAt: new Date(at).toISOString() });
    expect(res.body).toEqual({ id: expect.stringMatching(/^ssnd_/), status: 'scheduled', scheduledAt: at });
    const listed = (await env.stack.api('GET', '/v1/scheduled', { token: env.key })).body;
    expect(listed.find((s: any) => s.id === res.body.id)).toMatchObject({
      status: 'scheduled',
      to: ['later@rcpt.test'],
    });
    await env.sink.waitFor(to('later@rcpt.test'));
    const firedAt = Date.now();
    expect(firedAt).toBeGreaterThanOrEqual(at);
    expect(firedAt - at).toBeLessThan(3000);
    await eventually(async () => (await status(res.body.id)) === 'sent');
  });

  it('accepts relative text and ms epoch, and sends a past time now', async () => {
    expect((await env.send({ to: 'rel@rcpt.test', scheduledAt: 'in 2 hours' })).body.status).toBe('scheduled');
    expect((await env.send({ to: 'num@rcpt.test', scheduledAt: Date.now() + 3600_000 })).body.status).toBe('scheduled');
    expect((await env.send({ to: 'past@rcpt.test', scheduledAt: Date.now() - 1000 })).body.status).toBe('queued');
  });

  it('a cancelled send never reaches the sink; cancelling twice is still canceled', async () => {
    const res = await env.send({ to: 'cancel-me@rcpt.test', scheduledAt: Date.now() + 2500 });
    const cancel = await env.stack.api('DELETE', `/v1/scheduled/${res.body.id}`, { token: env.key });
    expect(cancel.body).toEqual({ ok: true, id: res.body.id, status: 'canceled' });
    expect((await env.stack.api('DELETE', `/v1/scheduled/${res.body.id}`, { token: env.key })).body.status).toBe(
      'canceled',
    );
    await new Promise((r) => setTimeout(r, 4000));
    expect(env.sink.received.some(to('cancel-me@rcpt.test'))).toBe(false);
    expect(await status(res.body.id)).toBe('canceled');
  });

  it('a cancel after sending began answers 409 too_late', async () => {
    const res = await env.send({ to: 'too-late@rcpt.test', scheduledAt: Date.now() + 1500 });
    await env.sink.waitFor(to('too-late@rcpt.test'));
    const cancel = await env.stack.api('DELETE', `/v1/scheduled/${res.body.id}`, { token: env.key });
    expect(cancel).toMatchObject({ status: 409, body: { code: 'too_late' } });
  });

  it('answers 404 for an unknown or foreign id', async () => {
    expect((await env.stack.api('DELETE', '/v1/scheduled/ssnd_unknown00000000000000', { token: env.key })).status).toBe(
      404,
    );
    const other = (
      await env.stack.api('POST', '/api/auth/signup', {
        body: { email: 'foreign@example.com', password: 'foreign account' },
      })
    ).body.token;
    const mine = await env.send({ to: 'mine@rcpt.test', scheduledAt: 'in 1 hour' });
    expect((await env.stack.api('DELETE', `/v1/scheduled/${mine.body.id}`, { token: other })).status).toBe(404);
  });

  it('every message of a scheduled batch has its own cancelable id', async () => {
    const res = await env.stack.api('POST', '/v1/send/batch', {
      token: env.key,
      body: {
        from: 'hello@acme.send.svc.test',
        subject: 's',
        text: 't',
        scheduledAt: 'in 1 hour',
        recipients: [{ to: 'b1@rcpt.test' }, { to: 'b2@rcpt.test' }],
      },
    });
    expect(res.body).toMatchObject({ sent: 0, scheduled: 2, failed: 0 });
    const [a, b] = res.body.results.map((r: any) => r.id);
    expect(a).not.toBe(b);
    expect((await env.stack.api('DELETE', `/v1/scheduled/${a}`, { token: env.key })).body.status).toBe('canceled');
    expect(await status(b)).toBe('scheduled');
  });

  it('a worker restart between scheduling and firing loses nothing', async () => {
    const service = env.stack.service;
    await service.worker!.shutdown();
    const res = await env.send({ to: 'restart@rcpt.test', scheduledAt: Date.now() + 1500 });
    await new Promise((r) => setTimeout(r, 2500));
    expect(env.sink.received.some(to('restart@rcpt.test'))).toBe(false);
    service.worker = await startWorker({
      core: service.core,
      address: service.temporalAddress,
      workflowBundle: { codePath: inject('workflowBundlePath') },
    });
    await env.sink.waitFor(to('restart@rcpt.test'));
    await eventually(async () => (await status(res.body.id)) === 'sent');
    const [row] = await service.core.db
      .select()
      .from(schema.scheduledSends)
      .where(eq(schema.scheduledSends.id, res.body.id));
    expect(row!.status).toBe('sent');
  });
});
