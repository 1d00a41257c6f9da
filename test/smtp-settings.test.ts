import nodemailer from 'nodemailer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStack, type TestStack } from './helpers/stack.js';

let stack: TestStack;
let token: string;
let accountKey: string;
let scopedKey: string;
let appPassword: string;

beforeAll(async () => {
  stack = await startStack({
    SERVICE_DOMAIN: 'settings.svc.test',
    SUBMISSION_HOST: 'smtp.settings.test',
    SUBMISSION_PUBLIC_PORT: '587',
    SUBMISSIONS_PUBLIC_PORT: '465',
  });
  token = (
    await stack.api('POST', '/api/auth/signup', {
      body: { email: 'settings@example.com', password: 'smtp settings pw' },
    })
  ).body.token;
  accountKey = (await stack.api('GET', '/api/keys', { token })).body.key;
  const domainId = (await stack.api('POST', '/api/domains/subdomain', { token, body: { subdomain: 'apps' } })).body
    .domain.id;
  scopedKey = (await stack.api('POST', '/api/keys/scoped', { token, body: { domainId, name: 'apps' } })).body.key;
  appPassword = (await stack.api('POST', '/api/app-passwords', { token, body: { domainId, protocols: ['smtp'] } })).body
    .secret;
}, 120_000);
afterAll(async () => {
  await stack?.stop();
});

describe('GET /api/smtp-settings', () => {
  it('answers the host and the ports users are told, from the configuration', async () => {
    const { submission, smtp } = stack.config;
    expect(submission).toMatchObject({ host: 'smtp.settings.test', publicPort: 587, publicTlsPort: 465 });
    const res = await stack.api('GET', '/api/smtp-settings', { token });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      host: submission.host,
      starttls_port: submission.publicPort,
      tls_port: submission.publicTlsPort,
      auth_methods: ['PLAIN', 'LOGIN'],
      username_hint: expect.stringContaining('user name'),
      password_hint: expect.stringContaining('svc_live_'),
      app_password_username_hint: expect.stringContaining('full address'),
      max_message_bytes: smtp.maxMessageBytes,
      max_recipients: smtp.maxRecipients,
    });
  });

  it('is the same for the account key, a scoped key and over tRPC; refused without a credential or with an app password', async () => {
    const bySession = (await stack.api('GET', '/api/smtp-settings', { token })).body;
    expect(await stack.api('GET', '/api/smtp-settings', { token: accountKey })).toMatchObject({
      status: 200,
      body: bySession,
    });
    expect(await stack.api('GET', '/api/smtp-settings', { token: scopedKey })).toMatchObject({
      status: 200,
      body: bySession,
    });
    const trpc = await stack.api('GET', '/trpc/smtpSettings.get', { token });
    expect(trpc.status).toBe(200);
    expect(trpc.body.result.data).toEqual(bySession);

    expect((await stack.api('GET', '/api/smtp-settings')).status).toBe(401);
    expect((await stack.api('GET', '/api/smtp-settings', { token: appPassword })).status).toBe(403);
  });

  it('the credentials it describes log in on both listeners of the submission role (STARTTLS and implicit TLS)', async () => {
    const { submissionPort, submissionsPort } = stack.service;
    expect(submissionPort).toBeGreaterThan(0);
    expect(submissionsPort).toBeGreaterThan(0);
    const login = (port: number, secure: boolean, pass: string) => {
      const transport = nodemailer.createTransport({
        host: '127.0.0.1',
        port,
        secure,
        requireTLS: !secure,
        auth: { user: 'any-user-name', pass },
        // No SMTP_TLS_CERT in this stack: smtp-server's development certificate.
        tls: { rejectUnauthorized: false },
      });
      return transport.verify().finally(() => transport.close());
    };
    await expect(login(submissionPort!, false, accountKey)).resolves.toBe(true);
    await expect(login(submissionsPort!, true, scopedKey)).resolves.toBe(true);
    await expect(login(submissionPort!, false, 'svc_live_not-a-key')).rejects.toMatchObject({ responseCode: 535 });
  });
});
