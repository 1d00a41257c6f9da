import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schema } from '../db/index.js';
import { createTokenService } from '../core/tokens.js';
import { tokenFromMail, waitForMail } from './helpers/outbox.js';
import { eventually, startStack, type TestStack } from './helpers/stack.js';

let stack: TestStack;
beforeAll(async () => {
  stack = await startStack();
});
afterAll(async () => {
  await stack?.stop();
});

describe('provisioning', () => {
  it('creates an account with a key, drops invalid channel and referrer, and refuses a known email', async () => {
    const res = await stack.api('POST', '/api/v1/provision', {
      body: {
        email: ' New.User@Example.COM ',
        channel: 'Not A Slug!',
        referrer: 'javascript:alert(1)',
        ref: 'friend-7',
      },
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ email: 'new.user@example.com', email_verified: false, is_new: true });
    expect(res.body.api_key).toMatch(/^svc_live_[A-Za-z0-9_-]{20,}$/);
    expect(res.body.user_id).toMatch(/^usr_[A-Za-z0-9_-]{20,}$/);
    const [row] = await stack.service.core.db.select().from(schema.users).where(eq(schema.users.id, res.body.user_id));
    expect(row).toMatchObject({ channel: null, referrer: null, ref: 'friend-7' });

    const again = await stack.api('POST', '/api/v1/provision', { body: { email: 'new.user@example.com' } });
    expect(again.status).toBe(409);
    expect(again.body).toEqual({ error: expect.any(String), code: 'account_exists' });
    expect(JSON.stringify(again.body)).not.toContain('svc_live_');
  });

  it('keeps a valid channel and referrer', async () => {
    const res = await stack.api('POST', '/api/v1/provision', {
      body: { email: 'chan@example.com', channel: 'cli-tool', referrer: 'https://blog.example.org/post' },
    });
    const [row] = await stack.service.core.db.select().from(schema.users).where(eq(schema.users.id, res.body.user_id));
    expect(row).toMatchObject({ channel: 'cli-tool', referrer: 'https://blog.example.org/post' });
  });

  it('mails a verification link through the outbound path; following it unblocks the account', async () => {
    const res = await stack.api('POST', '/api/v1/provision', { body: { email: 'verify-me@example.com' } });
    const key = res.body.api_key;
    expect((await stack.api('GET', '/v1/me', { token: key })).body).toMatchObject({
      email: 'verify-me@example.com',
      emailVerified: false,
    });

    const mail = await waitForMail(stack, 'verify-me@example.com', /Verify/);
    // The outbox row is written by the send itself; the row's status follows right after.
    const msg = await eventually(async () => {
      const [m] = await stack.service.core.db
        .select()
        .from(schema.messages)
        .where(eq(schema.messages.id, mail.messageId));
      return m?.status === 'sent' ? m : undefined;
    });
    // The run that delivered it: named after the first message of its group-committed batch.
    expect(msg).toMatchObject({ kind: 'system', workflowId: expect.stringMatching(/^outbound-msg_/) });

    const token = tokenFromMail(mail.raw);
    // A script confirms with the token (the page's button does the same).
    const verified = await stack.api('POST', '/api/auth/verify', { body: { token } });
    expect(verified).toMatchObject({
      status: 200,
      body: { ok: true, email: 'verify-me@example.com', emailVerified: true },
    });
    // The key provisioning answered keeps working: the client polls /v1/me with it (SPEC.md, Account lifecycle).
    expect((await stack.api('GET', '/v1/me', { token: key })).body).toMatchObject({
      email: 'verify-me@example.com',
      emailVerified: true,
    });
    const [row] = await stack.service.core.db
      .select()
      .from(schema.users)
      .where(eq(schema.users.email, 'verify-me@example.com'));
    expect(row!.emailVerified).toBe(true);
    expect((await stack.api('POST', '/api/auth/verify', { body: { token } })).body.code).toBe('invalid_token');
    expect((await stack.api('POST', '/api/auth/verify', { body: {} })).status).toBe(400);
  });
});

describe('signup, login and magic links', () => {
  it('signs up, logs in, and rejects a wrong password without saying which part was wrong', async () => {
    const up = await stack.api('POST', '/api/auth/signup', {
      body: { email: 'pw@example.com', password: 'correct horse battery' },
    });
    expect(up.status).toBe(201);
    expect(up.body.user).toMatchObject({ email: 'pw@example.com', emailVerified: false, plan: 'free' });
    expect(
      (await stack.api('POST', '/api/auth/signup', { body: { email: 'PW@example.com', password: 'another password' } }))
        .status,
    ).toBe(409);

    const ok = await stack.api('POST', '/api/auth/login', {
      body: { email: 'pw@example.com', password: 'correct horse battery' },
    });
    expect(ok.status).toBe(200);
    expect((await stack.api('GET', '/v1/me', { token: ok.body.token })).body.email).toBe('pw@example.com');

    const wrong = await stack.api('POST', '/api/auth/login', {
      body: { email: 'pw@example.com', password: 'nope nope nope' },
    });
    const unknown = await stack.api('POST', '/api/auth/login', {
      body: { email: 'nobody@example.com', password: 'nope nope nope' },
    });
    expect(wrong).toMatchObject({ status: 401, body: { code: 'invalid_credentials' } });
    expect(unknown.body).toEqual(wrong.body);
  });

  it('stores passwords with a memory-hard KDF, never in clear', async () => {
    const [row] = await stack.service.core.db
      .select()
      .from(schema.users)
      .where(eq(schema.users.email, 'pw@example.com'));
    expect(row!.passwordHash).toMatch(/^scrypt\$32768\$8\$1\$/);
    expect(row!.passwordHash).not.toContain('correct horse');
  });

  it('rate-limits repeated failed logins with 429 and Retry-After', async () => {
    await stack.api('POST', '/api/auth/signup', {
      body: { email: 'brute@example.com', password: 'the real password' },
    });
    let last;
    for (let i = 0; i < 11; i++)
      last = await stack.api('POST', '/api/auth/login', {
        body: { email: 'brute@example.com', password: `guess-${i}-xx` },
      });
    expect(last!.status).toBe(429);
    expect(last!.body.code).toBe('rate_limited');
    expect(Number(last!.headers.get('retry-after'))).toBeGreaterThan(0);
  });

  it('signs in with a mailed one-time link, which also verifies the address', async () => {
    await stack.api('POST', '/api/auth/signup', { body: { email: 'magic@example.com', password: 'some password 1' } });
    expect((await stack.api('POST', '/api/auth/signin-link', { body: { email: 'magic@example.com' } })).body).toEqual({
      ok: true,
    });
    expect((await stack.api('POST', '/api/auth/signin-link', { body: { email: 'ghost@example.com' } })).body).toEqual({
      ok: true,
    });
    const mail = await waitForMail(stack, 'magic@example.com', /sign-in link/);
    const token = tokenFromMail(mail.raw);
    const first = await stack.api('POST', '/api/auth/signin', { body: { token } });
    expect(first.status).toBe(200);
    expect(first.body.user).toMatchObject({ email: 'magic@example.com', emailVerified: true });
    expect((await stack.api('POST', '/api/auth/signin', { body: { token } })).status).toBe(401);
    expect((await stack.api('GET', '/auth/signin?token=abc')).status).toBe(401); // a page saying the link cannot be used
  });
});

describe('account creation limit', () => {
  it('bounds the accounts one client address can create per hour (signup and provision together)', async () => {
    const tight = await startStack({ SIGNUP_LIMIT_PER_HOUR: '2' }, ['api']);
    try {
      expect(
        (await tight.api('POST', '/api/auth/signup', { body: { email: 'l1@example.com', password: 'limit password' } }))
          .status,
      ).toBe(201);
      expect((await tight.api('POST', '/api/v1/provision', { body: { email: 'l2@example.com' } })).status).toBe(200);
      const third = await tight.api('POST', '/api/v1/provision', { body: { email: 'l3@example.com' } });
      expect(third).toMatchObject({ status: 429, body: { code: 'rate_limited' } });
      expect(Number(third.headers.get('retry-after'))).toBeGreaterThan(0);
    } finally {
      await tight.stop();
    }
  });
});

describe('credentials', () => {
  let session: string;
  beforeAll(async () => {
    session = (
      await stack.api('POST', '/api/auth/signup', {
        body: { email: 'keys@example.com', password: 'key owner password' },
      })
    ).body.token;
  });

  it('reads-or-creates one account key, and rotation kills the old key at once', async () => {
    const first = await stack.api('GET', '/api/keys', { token: session });
    const again = await stack.api('GET', '/api/keys', { token: session });
    expect(first.body.key).toMatch(/^svc_live_/);
    expect(again.body.key).toBe(first.body.key);
    expect((await stack.api('GET', '/v1/me', { token: first.body.key })).status).toBe(200);

    const rotated = await stack.api('POST', '/api/keys/rotate', { token: first.body.key });
    expect(rotated.status).toBe(200);
    expect(rotated.body.key).not.toBe(first.body.key);
    const old = await stack.api('GET', '/v1/me', { token: first.body.key });
    expect(old).toMatchObject({ status: 401, body: { code: 'invalid_key' } });
    expect((await stack.api('GET', '/v1/me', { token: rotated.body.key })).status).toBe(200);
    expect((await stack.api('GET', '/api/keys', { token: session })).body.key).toBe(rotated.body.key);
  });

  it('stores keys hashed and sealed, never in clear', async () => {
    const { key } = (await stack.api('GET', '/api/keys', { token: session })).body;
    const rows = await stack.service.core.db.select().from(schema.apiKeys);
    expect(JSON.stringify(rows)).not.toContain(key);
  });

  it('concurrent first reads agree on one key', async () => {
    const s = (
      await stack.api('POST', '/api/auth/signup', { body: { email: 'race@example.com', password: 'race password 1' } })
    ).body.token;
    const keys = await Promise.all(Array.from({ length: 5 }, () => stack.api('GET', '/api/keys', { token: s })));
    expect(new Set(keys.map((k) => k.body.key)).size).toBe(1);
  });

  it('answers missing, malformed, expired and wrong-kind credentials with the documented errors', async () => {
    expect((await stack.api('GET', '/api/keys')).body.code).toBe('unauthorized');
    expect((await stack.api('GET', '/api/keys', { headers: { authorization: 'Basic abc' } })).status).toBe(401);
    expect((await stack.api('GET', '/api/keys', { token: 'svc_live_doesnotexist0000000000' })).body.code).toBe(
      'invalid_key',
    );
    expect((await stack.api('GET', '/api/keys', { token: 'garbage' })).status).toBe(401);
    expect((await stack.api('GET', '/api/keys', { token: 'svc_pw_abcdefabcdefabcdefabcdef' })).body.code).toBe(
      'wrong_credential',
    );

    const tokens = createTokenService(stack.config.secretKey);
    const userId =
      (await stack.api('GET', '/v1/me', { token: session })).status === 200
        ? (await tokens.verify(session)).userId
        : '';
    const expired = await tokens.issue({ userId, kind: 'session' }, -10);
    expect((await stack.api('GET', '/api/keys', { token: expired })).body).toMatchObject({ code: 'token_expired' });
    const forged = await createTokenService('another-secret-another-secret-0123456789').issue({
      userId,
      kind: 'session',
    });
    expect((await stack.api('GET', '/api/keys', { token: forged })).status).toBe(401);
  });

  it('usage reflects the plan held in configuration', async () => {
    const res = await stack.api('GET', '/api/billing/usage', { token: session });
    expect(res.body).toEqual({
      plan: 'free',
      emails: { used: 0, included: 3000 },
      aiActions: { used: 0 },
      meteringEnabled: false,
      meters: [],
      overage: { over: false, metered: false, blocked: false, status: null, code: null },
      storage: { used: 0, mailboxes: 0, attachments: 0, quota: 1024 ** 3 },
    });
  });
});
