import { z } from 'zod';
import { defineOperation } from '../contract.js';

/** What an application is told to configure for SMTP submission (docs/smtp-submission.md); nothing here is secret. */
const smtpSettings = z.object({
  host: z.string().describe('Host name applications connect to (SUBMISSION_HOST, default the host of PUBLIC_URL)'),
  starttls_port: z
    .number()
    .int()
    .describe('Port with STARTTLS (SUBMISSION_PUBLIC_PORT, default SUBMISSION_PORT; 587 in the compose file)'),
  tls_port: z
    .number()
    .int()
    .describe('Port with implicit TLS (SUBMISSIONS_PUBLIC_PORT, default SUBMISSIONS_PORT; 465 in the compose file)'),
  auth_methods: z.array(z.enum(['PLAIN', 'LOGIN'])).describe('SASL mechanisms offered, only once TLS is up'),
  username_hint: z.string().describe('What to give as the user name'),
  password_hint: z.string().describe('What to give as the password'),
  app_password_username_hint: z.string().describe('The user name that goes with an app password granting smtp'),
  max_message_bytes: z.number().int().describe('Largest message accepted (SMTP_MAX_MESSAGE_BYTES)'),
  max_recipients: z.number().int().describe('Most RCPT TO per message (SMTP_MAX_RECIPIENTS)'),
});

export const getSmtpSettings = defineOperation({
  name: 'smtpSettings.get',
  method: 'GET',
  path: '/api/smtp-settings',
  auth: ['session', 'oauth', 'account_key', 'scoped_key'],
  summary: 'The settings an application uses to send with SMTP submission: host, ports, TLS modes, credentials.',
  output: smtpSettings,
  handler: async (_input, { core }) => {
    const { submission, smtp } = core.config;
    return {
      host: submission.host,
      starttls_port: submission.publicPort,
      tls_port: submission.publicTlsPort,
      auth_methods: ['PLAIN' as const, 'LOGIN' as const],
      username_hint: 'Any user name (e.g. your account email); it is not checked when the password is an API key',
      password_hint: 'The account key or a domain-scoped key (svc_live_…), or an app password (svc_pw_…) granting smtp',
      app_password_username_hint:
        "With an app password: the full address of a mailbox its pattern covers; the message's From must be one too",
      max_message_bytes: smtp.maxMessageBytes,
      max_recipients: smtp.maxRecipients,
    };
  },
});
