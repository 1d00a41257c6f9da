import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRateLimiter } from '../core/rate-limit.js';
import { tokenFromMail, waitForMail } from './helpers/outbox.js';
import { startStack, type TestStack } from './helpers/stack.js';

let stack: TestStack;
beforeAll(async () => { stack = await startStack(); });
afterAll(async () => { await stack?.stop(); });

const me = (token: string) => stack.api('GET', '/v1/me', { token });

describe('an account created for someone else\'s address', () => {
  it('loses every credential set before the owner verifies it', async () => {
    const email = 'victim@example.com';
    // The squatter signs up with the victim's address, keeps a session, mints the account key and a scoped key.
    const up = (await stack.api('POST', '/api/auth/signup', { body: { email, password: 'squatter password' } })).body;
    const key = (await stack.api('GET', '/api/keys', { token: up.token })).body.key;
    const domainId = (await stack.api('POST', '/api/domains/subdomain', { token: up.token, body: { subdomain: 'squat-box' } })).body.domain.id;
    const scoped = (await stack.api('POST', '/api/keys/scoped', { token: up.token, body: { domainId } })).body.key;
    for (const t of [up.token, key, scoped]) expect((await me(t)).status).toBe(200);

    // The real owner follows the verification link mailed to the address.
    const link = tokenFromMail((await waitForMail(stack, email, /Verify/)).raw);
    expect((await stack.api('GET', `/api/auth/verify?token=${link}`)).status).toBe(200);

    for (const t of [up.token, key, scoped]) expect((await me(t)).status).toBe(401);
    expect((await stack.api('POST', '/api/auth/login', { body: { email, password: 'squatter password' } })).status).toBe(401);

    // The owner gets in by a mailed link and sets a password of their own.
    await stack.api('POST', '/api/auth/password/forgot', { body: { email } });
    const reset = tokenFromMail((await waitForMail(stack, email, /Reset/)).raw);
    const session = (await stack.api('POST', '/api/auth/password/reset', { body: { token: reset, password: 'owner password 1' } })).body;
    expect((await me(session.token)).body).toMatchObject({ email, emailVerified: true });
    expect((await stack.api('POST', '/api/auth/password/reset', { body: { token: reset, password: 'again password' } })).status).toBe(401);
    expect((await stack.api('POST', '/api/auth/login', { body: { email, password: 'owner password 1' } })).status).toBe(200);
  });
});

describe('passwords and sessions', () => {
  it('changing the password signs out every other session', async () => {
    const email = 'changer@example.com';
    const first = (await stack.api('POST', '/api/auth/signup', { body: { email, password: 'first password' } })).body.token;
    const second = (await stack.api('POST', '/api/auth/login', { body: { email, password: 'first password' } })).body.token;
    expect((await stack.api('POST', '/api/auth/password', { token: first, body: { currentPassword: 'wrong one', password: 'second password' } })).status).toBe(401);
    const changed = await stack.api('POST', '/api/auth/password', { token: first, body: { currentPassword: 'first password', password: 'second password' } });
    expect(changed.status).toBe(200);
    expect((await me(first)).body.code).toBe('session_revoked');
    expect((await me(second)).status).toBe(401);
    expect((await me(changed.body.token)).status).toBe(200);
    expect((await stack.api('POST', '/api/auth/login', { body: { email, password: 'second password' } })).status).toBe(200);
  });

  it('forgot answers the same for unknown addresses', async () => {
    expect((await stack.api('POST', '/api/auth/password/forgot', { body: { email: 'nobody-here@example.com' } })).body).toEqual({ ok: true });
  });

  it('failed logins are limited per client address across many accounts', async () => {
    let status = 0;
    // 30 failures per client address per window, whatever the account: the 31st is refused before the password is checked.
    for (let i = 0; i < 31; i++) status = (await stack.api('POST', '/api/auth/login', { body: { email: `guess-${i}@example.com`, password: 'guess' } })).status;
    expect(status).toBe(429);
  });

  it('the rate-limit store stays bounded', () => {
    const limiter = createRateLimiter({ limit: 5, windowMs: 60_000, message: 'x', maxKeys: 1000 });
    for (let i = 0; i < 50_000; i++) limiter.hit(`client-${i}`);
    expect(limiter.size).toBeLessThanOrEqual(1000);
  });
});
