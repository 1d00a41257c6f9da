import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { and, eq, like } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IDEMPOTENCY_TTL_MS } from '../core/idempotency.js';
import { schema } from '../db/index.js';
import { connectTemporal } from '../temporal/client.js';
import { pruneIdempotencyKeysScheduleId } from '../workflows/ids.js';
import { startApiProcess } from './helpers/api-process.js';
import { FROM_DOMAIN, startSendingStack, type SendingStack } from './helpers/sending.js';
import { eventually, type ApiClient } from './helpers/stack.js';

/** Idempotency keys on every create (issue 26): replay, mismatch, concurrency, two API processes, expiry. */
let env: SendingStack;
const FROM = `Acme <keys@${FROM_DOMAIN}>`;
const keys = () => env.stack.service.core.db.select().from(schema.idempotencyKeys);

beforeAll(async () => {
  env = await startSendingStack();
});
afterAll(async () => {
  await env?.stop();
});

const sendKeyed = (key: string, body: Record<string, unknown>, api: ApiClient = env.stack.api, token = env.key) =>
  api('POST', '/v1/send', { token, headers: { 'Idempotency-Key': key }, body: { from: FROM, text: 'hello', ...body } });
const messagesWithSubject = async (subject: string) =>
  env.stack.service.core.db
    .select({ id: schema.messages.id })
    .from(schema.messages)
    .where(eq(schema.messages.subject, subject));
const emailsUsed = async () =>
  (await env.stack.api('GET', '/api/billing/usage', { token: env.key })).body.emails.used as number;

describe('a retried create is safe', () => {
  it('answers the same key and body with the first answer again: one message at the sink, one usage unit', async () => {
    const before = await emailsUsed();
    const body = { to: 'once@rcpt.test', subject: 'Exactly once' };
    const first = await sendKeyed('order-1001:send', body);
    expect(first.status).toBe(200);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    const again = await sendKeyed('order-1001:send', body);
    expect(again.status).toBe(200);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.body).toEqual(first.body);
    // The same request with its fields in another order is the same request.
    const reordered = await env.stack.api('POST', '/v1/send', {
      token: env.key,
      headers: { 'Idempotency-Key': 'order-1001:send' },
      body: { subject: 'Exactly once', text: 'hello', to: 'once@rcpt.test', from: FROM },
    });
    expect(reordered.body).toEqual(first.body);

    await env.sink.waitFor((r) => r.to.includes('once@rcpt.test'));
    // A message sent after the replays arrives; no second copy of the keyed one was ever made.
    expect((await env.send({ to: 'after-once@rcpt.test' })).status).toBe(200);
    await env.sink.waitFor((r) => r.to.includes('after-once@rcpt.test'));
    expect(env.sink.received.filter((r) => r.to.includes('once@rcpt.test'))).toHaveLength(1);
    expect((await messagesWithSubject('Exactly once')).map((m) => m.id)).toEqual([first.body.id]);
    expect(await emailsUsed()).toBe(before + 2);
  });

  it('answers the same key with a different body 422 idempotency_key_reused, and runs nothing', async () => {
    expect((await sendKeyed('reuse-1', { to: 'a@rcpt.test', subject: 'Reuse A' })).status).toBe(200);
    const other = await sendKeyed('reuse-1', { to: 'b@rcpt.test', subject: 'Reuse B' });
    expect(other).toMatchObject({ status: 422, body: { code: 'idempotency_key_reused' } });
    expect(await messagesWithSubject('Reuse B')).toEqual([]);
    // A key names one request of one operation: the same key on another create is a reuse too.
    const contact = await env.stack.api('POST', '/api/contacts', {
      token: env.key,
      headers: { 'Idempotency-Key': 'reuse-1' },
      body: { email: 'c@example.com' },
    });
    expect(contact).toMatchObject({ status: 422, body: { code: 'idempotency_key_reused' } });
  });

  it('sends exactly once for 20 concurrent requests with one key; the others answer 409 in progress or the replay', async () => {
    const body = { to: 'storm@rcpt.test', subject: 'Concurrent storm' };
    const answers = await Promise.all(Array.from({ length: 20 }, () => sendKeyed('storm-1', body)));
    const ok = answers.filter((a) => a.status === 200);
    const busy = answers.filter((a) => a.status === 409);
    expect(ok.length + busy.length).toBe(20);
    expect(ok.length).toBeGreaterThanOrEqual(1);
    for (const b of busy) expect(b.body.code).toBe('idempotency_in_progress');
    expect(new Set(ok.map((a) => a.body.id)).size).toBe(1);
    expect(ok.filter((a) => a.headers.get('idempotent-replayed') !== 'true')).toHaveLength(1);
    expect((await messagesWithSubject('Concurrent storm')).map((m) => m.id)).toEqual([ok[0]!.body.id]);
    // Once the first is done, every retry gets its answer.
    expect((await sendKeyed('storm-1', body)).body).toEqual(ok[0]!.body);
  });

  it('releases the key of a failed request, so the corrected retry runs', async () => {
    const refused = await sendKeyed('fix-me-1', {
      from: 'me@unverified.example',
      to: 'fixed@rcpt.test',
      subject: 'Fixed later',
    });
    expect(refused).toMatchObject({ status: 403, body: { code: 'domain_not_verified' } });
    const invalid = await sendKeyed('fix-me-2', { to: 'fixed@rcpt.test', subject: 'Fixed later', bogus: true });
    expect(invalid).toMatchObject({ status: 400, body: { code: 'validation_error' } });
    expect((await keys()).filter((k) => k.key.startsWith('fix-me-'))).toEqual([]);
    const fixed = await sendKeyed('fix-me-1', { to: 'fixed@rcpt.test', subject: 'Fixed later' });
    expect(fixed.status).toBe(200);
    expect(fixed.headers.get('idempotent-replayed')).toBeNull();
  });

  it('bounds the key: 1 to 255 printable ASCII characters', async () => {
    for (const bad of ['x'.repeat(256), 'has space', 'naïve']) {
      const res = await env.stack.api('POST', '/v1/send', {
        token: env.key,
        headers: { 'Idempotency-Key': bad },
        body: { from: FROM, to: 'k@rcpt.test', subject: 'never', text: 't' },
      });
      expect(res, bad).toMatchObject({ status: 400, body: { code: 'invalid_idempotency_key' } });
    }
    expect((await sendKeyed('k'.repeat(255), { to: 'k@rcpt.test', subject: 'Longest key' })).status).toBe(200);
    expect(await messagesWithSubject('never')).toEqual([]);
  });

  it("scopes keys to the account, and a scoped key never replays the account key's answer", async () => {
    const body = { to: 'scope@rcpt.test', subject: 'Scoped key check' };
    const mine = await sendKeyed('shared-key', body);
    expect(mine.status).toBe(200);
    const acme = (await env.stack.api('GET', '/api/domains', { token: env.session })).body.find(
      (d: any) => d.domain === FROM_DOMAIN,
    );
    const scoped = (
      await env.stack.api('POST', '/api/keys/scoped', { token: env.session, body: { domainId: acme.id } })
    ).body.key;
    expect(await sendKeyed('shared-key', body, env.stack.api, scoped)).toMatchObject({
      status: 422,
      body: { code: 'idempotency_key_reused' },
    });

    const s = (
      await env.stack.api('POST', '/api/auth/signup', {
        body: { email: 'other-tenant@example.com', password: 'other tenant pw' },
      })
    ).body;
    await env.stack.service.core.db
      .update(schema.users)
      .set({ emailVerified: true })
      .where(eq(schema.users.id, s.user.id));
    await env.stack.api('POST', '/api/domains/subdomain', { token: s.token, body: { subdomain: 'tenant2' } });
    const theirs = await env.stack.api('POST', '/v1/send', {
      token: (await env.stack.api('GET', '/api/keys', { token: s.token })).body.key,
      headers: { 'Idempotency-Key': 'shared-key' },
      body: {
        from: `x@tenant2.${env.stack.config.serviceDomain}`,
        to: 'scope@rcpt.test',
        subject: 'Scoped key check',
        text: 'hello',
      },
    });
    expect(theirs.status).toBe(200);
    expect(theirs.headers.get('idempotent-replayed')).toBeNull();
    expect(theirs.body.id).not.toBe(mine.body.id);
  });

  it('takes the key as a tRPC input field; REST and tRPC share one key space', async () => {
    const input = { from: FROM, to: 'trpc@rcpt.test', subject: 'Over tRPC', text: 'hello', idempotencyKey: 'trpc-1' };
    const call = () =>
      fetch(`${env.stack.baseUrl}/trpc/send.single`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${env.key}` },
        body: JSON.stringify(input),
      });
    const first = await call();
    const firstBody = await first.json();
    expect(first.status).toBe(200);
    const again = await call();
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(await again.json()).toEqual(firstBody);
    const { idempotencyKey, ...rest } = input;
    const overRest = await sendKeyed(idempotencyKey, rest);
    expect(overRest.body).toEqual(firstBody.result.data);
    expect(await messagesWithSubject('Over tRPC')).toHaveLength(1);
    // A key on an operation that takes none is ignored: reads and updates are safe to repeat.
    const read = await env.stack.api('GET', '/api/domains', {
      token: env.key,
      headers: { 'Idempotency-Key': 'trpc-1' },
    });
    expect(read.status).toBe(200);
  });
});

/** A URL that answers only when the test says so: an attachment upload that fetches it is "still running". */
async function heldFile(): Promise<{
  url: string;
  arrived: Promise<void>;
  answer(status: number): void;
  close(): Promise<void>;
}> {
  let arrive!: () => void;
  const arrived = new Promise<void>((r) => {
    arrive = r;
  });
  let respond: ((status: number) => void) | undefined;
  const server: Server = createServer((_req, res) => {
    respond = (status) => {
      res.writeHead(status, { 'content-type': 'text/plain' }).end(status === 200 ? 'the file' : 'broken');
    };
    arrive();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/report.txt`,
    arrived,
    answer: (status) => respond!(status),
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

describe('while the first request runs', () => {
  const upload = (key: string, url: string) =>
    env.stack.api('POST', '/v1/attachments', {
      token: env.key,
      headers: { 'Idempotency-Key': key },
      body: { url, filename: 'report.txt' },
    });

  it('answers a second request 409 idempotency_in_progress, then the first answer once it is done', async () => {
    const file = await heldFile();
    const first = upload('upload-1', file.url);
    await file.arrived;
    expect(await upload('upload-1', file.url)).toMatchObject({
      status: 409,
      body: { code: 'idempotency_in_progress' },
    });
    file.answer(200);
    const done = await first;
    expect(done.status).toBe(201);
    const replay = await upload('upload-1', file.url);
    expect(replay).toMatchObject({ status: 201, body: done.body });
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    await file.close();
  });

  it('releases the key when the first request fails, so a retry runs', async () => {
    const broken = await heldFile();
    const first = upload('upload-2', broken.url);
    await broken.arrived;
    broken.answer(500);
    expect((await first).status).toBeGreaterThanOrEqual(400);
    await broken.close();
    const working = await heldFile();
    const retry = upload('upload-2', working.url);
    await working.arrived;
    working.answer(200);
    // A different URL is a different body: only a released key lets it run.
    expect((await retry).status).toBe(201);
    await working.close();
  });
});

describe('raw uploads', () => {
  it('take the key too: the bytes are part of the request', async () => {
    const raw = (bytes: string) =>
      env.stack.api('POST', '/v1/attachments?filename=notes.txt', {
        token: env.key,
        raw: bytes,
        headers: { 'content-type': 'text/plain', 'Idempotency-Key': 'raw-1' },
      });
    const first = await raw('first bytes');
    expect(first.status).toBe(201);
    const again = await raw('first bytes');
    expect(again).toMatchObject({ status: 201, body: { id: first.body.id } });
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(await raw('other bytes')).toMatchObject({ status: 422, body: { code: 'idempotency_key_reused' } });
  });
});

describe('claims abandoned by a crashed process', () => {
  it('are taken over by the same request once the lease runs out; the lost claim can no longer write its answer', async () => {
    const store = env.stack.service.core.idempotency;
    const userId = (await keys())[0]!.userId;
    const req = { userId, key: 'crash-1', operation: 'send.single', fingerprint: 'f'.repeat(64) };
    const t0 = Date.now();
    const crashed = await store.claim(req, t0);
    expect(crashed.kind).toBe('claimed');
    await expect(store.claim(req, t0 + 1000)).rejects.toMatchObject({ code: 'idempotency_in_progress' });
    await expect(store.claim({ ...req, fingerprint: 'e'.repeat(64) }, t0 + 60_000)).rejects.toMatchObject({
      code: 'idempotency_key_reused',
    });
    const retry = await store.claim(req, t0 + 60_000);
    expect(retry.kind).toBe('claimed');
    expect(await store.complete(req, (crashed as { token: string }).token, { status: 200, body: { id: 'late' } })).toBe(
      false,
    );
    expect(
      await store.complete(req, (retry as { token: string }).token, { status: 200, body: { id: 'msg_retry' } }),
    ).toBe(true);
    expect(await store.claim(req)).toEqual({ kind: 'replay', answer: { status: 200, body: { id: 'msg_retry' } } });
  });
});

describe('across two API processes on one database', () => {
  it('replays in one process what the other answered, and sends once for concurrent requests spread over both', async () => {
    const second = await startApiProcess(env.stack);
    try {
      const body = { to: 'two@rcpt.test', subject: 'Two processes' };
      const first = await sendKeyed('two-proc-1', body, env.stack.api);
      const there = await sendKeyed('two-proc-1', body, second.api);
      expect(there.status).toBe(200);
      expect(there.headers.get('idempotent-replayed')).toBe('true');
      expect(there.body).toEqual(first.body);

      const storm = { to: 'two-storm@rcpt.test', subject: 'Two process storm' };
      const answers = await Promise.all(
        Array.from({ length: 20 }, (_, i) => sendKeyed('two-proc-2', storm, i % 2 ? second.api : env.stack.api)),
      );
      expect(
        answers.every((a) => a.status === 200 || (a.status === 409 && a.body.code === 'idempotency_in_progress')),
      ).toBe(true);
      expect(new Set(answers.filter((a) => a.status === 200).map((a) => a.body.id)).size).toBe(1);
      expect(await messagesWithSubject('Two process storm')).toHaveLength(1);
      // The message the second process accepted is delivered by the worker both share.
      const fromSecond = await sendKeyed(
        'two-proc-3',
        { to: 'via-second@rcpt.test', subject: 'Via the second process' },
        second.api,
      );
      expect(fromSecond.status).toBe(200);
      await env.sink.waitFor((r) => r.to.includes('via-second@rcpt.test'));
      expect(
        (
          await sendKeyed(
            'two-proc-3',
            { to: 'via-second@rcpt.test', subject: 'Via the second process' },
            env.stack.api,
          )
        ).body,
      ).toEqual(fromSecond.body);
    } finally {
      await second.stop();
    }
  }, 120_000);
});

describe('expiry', () => {
  it('keeps a key 24 hours; an expired key is a new key, and the housekeeping schedule deletes expired rows', async () => {
    const db = env.stack.service.core.db;
    const t = schema.idempotencyKeys;
    const first = await sendKeyed('expire-1', { to: 'exp@rcpt.test', subject: 'Before expiry' });
    const [row] = await db.select().from(t).where(eq(t.key, 'expire-1'));
    expect(row!.expiresAt - row!.createdAt).toBe(IDEMPOTENCY_TTL_MS);
    // Twenty-four hours pass (the row's clock is moved back: the test cannot wait a day).
    await db
      .update(t)
      .set({ expiresAt: Date.now() - 1 })
      .where(eq(t.key, 'expire-1'));
    const later = await sendKeyed('expire-1', { to: 'exp@rcpt.test', subject: 'After expiry' });
    expect(later.status).toBe(200);
    expect(later.headers.get('idempotent-replayed')).toBeNull();
    expect(later.body.id).not.toBe(first.body.id);

    await sendKeyed('expire-2', { to: 'exp@rcpt.test', subject: 'Swept' });
    await db
      .update(t)
      .set({ expiresAt: Date.now() - 1 })
      .where(eq(t.key, 'expire-2'));
    const temporal = await connectTemporal({
      address: env.stack.service.temporalAddress,
      namespace: 'default',
      taskQueue: env.stack.config.temporal.taskQueue,
    });
    try {
      await temporal.client.schedule
        .getHandle(pruneIdempotencyKeysScheduleId(env.stack.config.temporal.taskQueue))
        .trigger();
      await eventually(async () => (await db.select().from(t).where(eq(t.key, 'expire-2'))).length === 0);
    } finally {
      await temporal.connection.close();
    }
    // Keys within their 24 hours stay.
    expect(
      await db
        .select()
        .from(t)
        .where(and(like(t.key, 'expire-%')))
        .then((rows) => rows.map((r) => r.key)),
    ).toEqual(['expire-1']);
  });
});
