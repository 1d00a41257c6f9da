import { eq } from 'drizzle-orm';
import { simpleParser } from 'mailparser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schema } from '../db/index.js';
import { startSmtpSink } from './helpers/smtp-sink.js';
import { eventually, startStack, type TestStack } from './helpers/stack.js';

let stack: TestStack;
let relay: Awaited<ReturnType<typeof startSmtpSink>>;
beforeAll(async () => {
  relay = await startSmtpSink({
    onRcpt: (a) => (a.startsWith('rejected') ? { code: 550, message: '5.7.1 Relay refused' } : undefined),
  });
  stack = await startStack({
    SMTP_RELAY_URL: `smtp://127.0.0.1:${relay.port}`,
    SERVICE_DOMAIN: 'relay.svc.test',
    OUTBOUND_RETRY_SCHEDULE: '300,300',
  });
});
afterAll(async () => {
  await stack?.stop();
  await relay?.close();
});

describe('OUTBOUND_MODE=relay', () => {
  it('hands every message to the smarthost; a 5xx there is a hard bounce', async () => {
    expect(stack.config.outboundMode).toBe('relay');
    const s = (
      await stack.api('POST', '/api/auth/signup', { body: { email: 'relayer@example.com', password: 'relay user pw' } })
    ).body;
    await stack.service.core.db.update(schema.users).set({ emailVerified: true }).where(eq(schema.users.id, s.user.id));
    await stack.api('POST', '/api/domains/subdomain', { token: s.token, body: { subdomain: 'out' } });
    const key = (await stack.api('GET', '/api/keys', { token: s.token })).body.key;
    const send = (to: string) =>
      stack.api('POST', '/v1/send', {
        token: key,
        body: { from: 'a@out.relay.svc.test', to, subject: 'via relay', text: 'x' },
      });
    expect((await send('anyone@elsewhere.example')).status).toBe(200);
    const got = await relay.waitFor((r) => r.to.includes('anyone@elsewhere.example'));
    expect((await simpleParser(got.raw)).headers.get('dkim-signature')).toBeDefined();
    const bad = (await send('rejected@elsewhere.example')).body.id;
    await eventually(
      async () =>
        (await stack.service.core.db.select().from(schema.messages).where(eq(schema.messages.id, bad)))[0]?.status ===
        'bounced',
    );
  });

  it('a domain that requires TLS is never handed to a relay without STARTTLS: deferred, then bounced tls_required', async () => {
    const s = (
      await stack.api('POST', '/api/auth/signup', { body: { email: 'strict@example.com', password: 'strict user pw' } })
    ).body;
    await stack.service.core.db.update(schema.users).set({ emailVerified: true }).where(eq(schema.users.id, s.user.id));
    const domainId = (
      await stack.api('POST', '/api/domains/subdomain', { token: s.token, body: { subdomain: 'tight' } })
    ).body.domain.id;
    const patched = await stack.api('PATCH', `/api/domains/${domainId}`, { token: s.token, body: { tls: 'enforced' } });
    expect(patched.body.domain.tls).toBe('enforced');
    const key = (await stack.api('GET', '/api/keys', { token: s.token })).body.key;
    const id = (
      await stack.api('POST', '/v1/send', {
        token: key,
        body: { from: 'a@tight.relay.svc.test', to: 'strict@elsewhere.example', subject: 'strict', text: 'x' },
      })
    ).body.id;
    const row = await eventually(async () => {
      const [m] = await stack.service.core.db.select().from(schema.messages).where(eq(schema.messages.id, id));
      return m?.status === 'bounced' ? m : undefined;
    }, 30_000);
    expect(row.recipients?.['strict@elsewhere.example']).toMatchObject({ bounceClass: 'tls_required' });
    expect(row.trail?.[0]?.response).toMatch(/TLS required by the sending domain/);
    expect(relay.received.some((r) => r.to.includes('strict@elsewhere.example'))).toBe(false);
  });
});
