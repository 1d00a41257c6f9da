import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRateLimiter } from '../core/rate-limit.js';
import { startStack, type TestStack } from './helpers/stack.js';

let stack: TestStack;
beforeAll(async () => {
  stack = await startStack();
});
afterAll(async () => {
  await stack?.stop();
});

const me = (token: string) => stack.api('GET', '/v1/me', { token });

describe('passwords and sessions', () => {
  it('changing the password signs out every other session', async () => {
    const email = 'changer@example.com';
    const first = (await stack.api('POST', '/api/auth/signup', { body: { email, password: 'first password' } })).body
      .token;
    const second = (await stack.api('POST', '/api/auth/login', { body: { email, password: 'first password' } })).body
      .token;
    expect(
      (
        await stack.api('POST', '/api/auth/password', {
          token: first,
          body: { currentPassword: 'wrong one', password: 'second password' },
        })
      ).status,
    ).toBe(401);
    const changed = await stack.api('POST', '/api/auth/password', {
      token: first,
      body: { currentPassword: 'first password', password: 'second password' },
    });
    expect(changed.status).toBe(200);
    expect((await me(first)).body.code).toBe('session_revoked');
    expect((await me(second)).status).toBe(401);
    expect((await me(changed.body.token)).status).toBe(200);
    expect((await stack.api('POST', '/api/auth/login', { body: { email, password: 'second password' } })).status).toBe(
      200,
    );
  });

  it('forgot answers the same for unknown addresses', async () => {
    expect(
      (await stack.api('POST', '/api/auth/password/forgot', { body: { email: 'nobody-here@example.com' } })).body,
    ).toEqual({ ok: true });
  });

  it('failed logins are limited per client address across many accounts', async () => {
    let status = 0;
    // 30 failures per client address per window, whatever the account: the 31st is refused before the password is checked.
    for (let i = 0; i < 31; i++)
      status = (
        await stack.api('POST', '/api/auth/login', { body: { email: `guess-${i}@example.com`, password: 'guess' } })
      ).status;
    expect(status).toBe(429);
  });

  it('the rate-limit store stays bounded', () => {
    const limiter = createRateLimiter({ limit: 5, windowMs: 60_000, message: 'x', maxKeys: 1000 });
    for (let i = 0; i < 50_000; i++) limiter.hit(`client-${i}`);
    expect(limiter.size).toBeLessThanOrEqual(1000);
  });
});
