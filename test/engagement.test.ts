import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schema } from '../db/index.js';
import { connectTemporal } from '../temporal/client.js';
import { engagementSweepScheduleId, pruneAttemptsScheduleId } from '../workflows/ids.js';
import { approveOverHttp, authorizeUrl, pkce, registerClient, tokenRequest } from './helpers/oauth.js';
import { eventually, startStack, type TestStack } from './helpers/stack.js';
import { startWebhookReceiver, verifySignature } from './helpers/webhook-receiver.js';

const SERVICE = 'eng.svc.test';
let stack: TestStack;
let hooks: Awaited<ReturnType<typeof startWebhookReceiver>>;
let session: string;
let key: string;
let domainId: string;

beforeAll(async () => {
  hooks = await startWebhookReceiver();
  stack = await startStack({ SERVICE_DOMAIN: SERVICE, WEBHOOK_RETRY_SCHEDULE: '300' });
  const s = (
    await stack.api('POST', '/api/auth/signup', {
      body: { email: 'engaged@example.com', password: 'engaged password' },
    })
  ).body;
  session = s.token;
  await stack.service.core.db.update(schema.users).set({ emailVerified: true }).where(eq(schema.users.id, s.user.id));
  domainId = (await stack.api('POST', '/api/domains/subdomain', { token: session, body: { subdomain: 'news' } })).body
    .domain.id;
  key = (await stack.api('GET', '/api/keys', { token: session })).body.key;
});
afterAll(async () => {
  await stack?.stop();
  await hooks?.close();
});

const send = async (subject: string) =>
  (
    await stack.api('POST', '/v1/send', {
      token: key,
      body: { from: `a@news.${SERVICE}`, to: 'reader@example.org', subject, text: 'x' },
    })
  ).body.id as string;

describe('engagement events to webhooks', () => {
  it('the tracking webhook gets email.sent signed with the account secret', async () => {
    const set = await stack.api('PUT', `/api/domains/${domainId}/tracking-webhook`, {
      token: session,
      body: { url: `${hooks.base}/tracking` },
    });
    expect(set.body.domain.tracking_webhook_url).toBe(`${hooks.base}/tracking`);
    const accountSecret = (await stack.api('GET', '/api/webhooks/secret', { token: session })).body.secret;
    expect(set.body.signingSecret).toBe(accountSecret);
    hooks.secret('/tracking', accountSecret);
    const id = await send('tracked');
    const hit = await eventually(async () => hooks.hitsOn('/tracking').find((h) => h.json?.data?.messageId === id));
    expect(hit.verified).toBe(true);
    expect(hit.json).toMatchObject({
      id: expect.stringMatching(/^evt_/),
      type: 'email.sent',
      data: { messageId: id, subject: 'tracked', to: ['reader@example.org'] },
    });
    expect(new Date(hit.json.createdAtIso).getTime()).toBe(hit.json.createdAt);
  });

  it('the inbound webhook gets opted-in types only, signed with its route secret; the tracking webhook wins when set', async () => {
    const route = (
      await stack.api('PUT', `/api/domains/${domainId}/webhook`, {
        token: session,
        body: { url: `${hooks.base}/inbound` },
      })
    ).body;
    hooks.secret('/inbound', route.signingSecret);
    const ev = await stack.api('PUT', `/api/domains/${domainId}/webhook-events`, {
      token: session,
      body: { events: ['email.sent'] },
    });
    expect(ev.body.domain.webhook_events).toBe('["email.sent"]');
    const a = await send('still to tracking');
    await eventually(async () => hooks.hitsOn('/tracking').find((h) => h.json?.data?.messageId === a));
    expect((await stack.api('DELETE', `/api/domains/${domainId}/tracking-webhook`, { token: session })).body).toEqual({
      ok: true,
    });
    const b = await send('now to inbound');
    const hit = await eventually(async () => hooks.hitsOn('/inbound').find((h) => h.json?.data?.messageId === b));
    expect(hit.verified).toBe(true);
    expect(hooks.hitsOn('/inbound').some((h) => h.json?.data?.messageId === a)).toBe(false);
    expect(
      (
        await stack.api('PUT', `/api/domains/${domainId}/webhook-events`, {
          token: session,
          body: { events: ['email.nope'] },
        })
      ).status,
    ).toBe(400);
    expect((await stack.api('DELETE', `/api/domains/${domainId}/webhook-events`, { token: session })).body).toEqual({
      ok: true,
    });
  });

  it('both engagement endpoints answer signingSecret to every credential that may call them, a domain-scoped key included', async () => {
    const accountSecret = (await stack.api('GET', '/api/webhooks/secret', { token: session })).body.secret;
    const scoped = (await stack.api('POST', '/api/keys/scoped', { token: session, body: { domainId } })).body.key;
    const redirectUri = 'http://127.0.0.1:9/cb';
    const { client_id: clientId } = await registerClient(stack, [redirectUri], 'Engagement app');
    const { verifier, challenge } = pkce();
    const back = await approveOverHttp(stack, authorizeUrl(stack, { clientId, redirectUri, challenge }), {
      email: 'engaged@example.com',
      password: 'engaged password',
    });
    const oauth = (
      await tokenRequest(stack, {
        grant_type: 'authorization_code',
        code: back.searchParams.get('code')!,
        redirect_uri: redirectUri,
        client_id: clientId,
        code_verifier: verifier,
      })
    ).body.access_token;
    for (const [kind, token] of [
      ['session', session],
      ['account key', key],
      ['oauth token', oauth],
      ['scoped key', scoped],
    ] as const) {
      const tracking = await stack.api('PUT', `/api/domains/${domainId}/tracking-webhook`, {
        token,
        body: { url: `${hooks.base}/secret-check` },
      });
      expect(tracking.status, kind).toBe(200);
      expect(tracking.body.signingSecret, kind).toBe(accountSecret);
      const events = await stack.api('PUT', `/api/domains/${domainId}/webhook-events`, {
        token,
        body: { events: 'all' },
      });
      expect(events.status, kind).toBe(200);
      expect(events.body.signingSecret, kind).toBe(accountSecret);
    }
    await stack.api('DELETE', `/api/domains/${domainId}/tracking-webhook`, { token: session });
    await stack.api('DELETE', `/api/domains/${domainId}/webhook-events`, { token: session });
  });

  it('an event whose first POST fails becomes its own retried delivery', async () => {
    let calls = 0;
    hooks.on('/flaky-tracking', () => (++calls === 1 ? { status: 500 } : { status: 200 }));
    await stack.api('PUT', `/api/domains/${domainId}/tracking-webhook`, {
      token: session,
      body: { url: `${hooks.base}/flaky-tracking` },
    });
    const id = await send('retry the event');
    await eventually(
      async () => hooks.hitsOn('/flaky-tracking').filter((h) => h.json?.data?.messageId === id).length >= 2,
    );
    const [dlv] = await stack.service.core.db
      .select()
      .from(schema.deliveries)
      .where(eq(schema.deliveries.kind, 'engagement'));
    expect(dlv).toBeDefined();
    await eventually(
      async () =>
        (await stack.service.core.db.select().from(schema.deliveries).where(eq(schema.deliveries.id, dlv!.id)))[0]
          ?.status === 'delivered',
    );
    const attempts = (await stack.api('GET', `/api/deliveries/${dlv!.id}/attempts`, { token: session })).body.attempts;
    expect(attempts.map((x: any) => x.ok)).toEqual([1, 0]);
  });

  it('a DSN arriving over SMTP at the return path becomes email.bounced and a suppression', async () => {
    const id = await send('will bounce later');
    await eventually(
      async () =>
        (await stack.service.core.db.select().from(schema.messages).where(eq(schema.messages.id, id)))[0]?.status ===
        'sent',
    );
    const boundary = 'dsn-boundary';
    const raw = [
      'From: MAILER-DAEMON@mx.example.org',
      `To: bounce+${id}@bounces.news.${SERVICE}`,
      'Subject: Undelivered Mail Returned to Sender',
      `Content-Type: multipart/report; report-type=delivery-status; boundary="${boundary}"`,
      'MIME-Version: 1.0',
      '',
      `--${boundary}`,
      'Content-Type: text/plain',
      '',
      'Your message could not be delivered.',
      '',
      `--${boundary}`,
      'Content-Type: message/delivery-status',
      '',
      'Reporting-MTA: dns; mx.example.org',
      '',
      'Final-Recipient: rfc822; reader@example.org',
      'Action: failed',
      'Status: 5.1.1',
      'Diagnostic-Code: smtp; 550 5.1.1 user unknown',
      '',
      `--${boundary}--`,
      '',
    ].join('\r\n');
    const nodemailer = (await import('nodemailer')).default;
    const t = nodemailer.createTransport({
      host: '127.0.0.1',
      port: stack.service.smtpPort!,
      secure: false,
      ignoreTLS: true,
    });
    await t.sendMail({ envelope: { from: '', to: [`bounce+${id}@bounces.news.${SERVICE}`] }, raw });
    const sup = await eventually(async () =>
      (await stack.api('GET', '/api/contacts/suppressions', { token: session })).body.find(
        (x: any) => x.email === 'reader@example.org',
      ),
    );
    expect(sup).toMatchObject({ reason: 'hard_bounce', messageId: id });
    const events = (await stack.api('GET', `/api/events?messageId=${id}`, { token: session })).body.map(
      (e: any) => e.type,
    );
    expect(events).toContain('email.bounced');
    await stack.api('DELETE', '/api/contacts/suppressions/reader@example.org', { token: session });
  });

  it('housekeeping schedules: attempts past 45 days are pruned; events left pending are dispatched', async () => {
    const db = stack.service.core.db;
    const old = Date.now() - 46 * 86_400_000;
    await db.insert(schema.deliveryAttempts).values({
      id: 'att_old_capture_000000000000',
      deliveryId: 'dlv_gone',
      messageId: 'msg_gone',
      attemptNumber: 1,
      ok: 1,
      requestedAt: old,
      createdAt: old,
    });
    await stack.api('PUT', `/api/domains/${domainId}/tracking-webhook`, {
      token: session,
      body: { url: `${hooks.base}/swept` },
    });
    const [user] = await db.select().from(schema.users).where(eq(schema.users.email, 'engaged@example.com'));
    const lost = Date.now() - 60_000;
    await db.insert(schema.events).values({
      id: 'evt_left_pending_0000000000',
      userId: user!.id,
      domainId,
      type: 'email.opened',
      data: { open: { userAgent: 'x' } },
      webhookState: 'pending',
      createdAt: lost,
    });
    const t = await connectTemporal({
      address: stack.service.temporalAddress,
      namespace: 'default',
      taskQueue: stack.config.temporal.taskQueue,
    });
    await t.client.schedule.getHandle(pruneAttemptsScheduleId(stack.config.temporal.taskQueue)).trigger();
    await t.client.schedule.getHandle(engagementSweepScheduleId(stack.config.temporal.taskQueue)).trigger();
    await eventually(
      async () =>
        (
          await db
            .select()
            .from(schema.deliveryAttempts)
            .where(eq(schema.deliveryAttempts.id, 'att_old_capture_000000000000'))
        ).length === 0,
      30_000,
    );
    const hit = await eventually(
      async () => hooks.hitsOn('/swept').find((h) => h.json?.id === 'evt_left_pending_0000000000'),
      30_000,
    );
    expect(hit.json.type).toBe('email.opened');
    await t.connection.close();
  });

  it('rotating the account secret changes the signature key', async () => {
    const before = (await stack.api('GET', '/api/webhooks/secret', { token: session })).body.secret;
    const rotated = (await stack.api('POST', '/api/webhooks/secret/rotate', { token: session })).body.secret;
    expect(rotated).toMatch(/^whsec_/);
    expect(rotated).not.toBe(before);
    await stack.api('PUT', `/api/domains/${domainId}/tracking-webhook`, {
      token: session,
      body: { url: `${hooks.base}/rotated` },
    });
    const id = await send('after rotation');
    const hit = await eventually(async () => hooks.hitsOn('/rotated').find((h) => h.json?.data?.messageId === id));
    expect(verifySignature(rotated, hit.headers['x-svc-signature'] as string, hit.body)).toBe(true);
    expect(verifySignature(before, hit.headers['x-svc-signature'] as string, hit.body)).toBe(false);
  });
});
