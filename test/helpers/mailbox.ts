import nodemailer from 'nodemailer';
import type { TestStack } from './stack.js';

/** Mail into the SMTP ingress of a stack, as a remote MTA would send it. */
export function ingress(stack: TestStack) {
  const t = nodemailer.createTransport({
    host: '127.0.0.1',
    port: stack.service.smtpPort!,
    secure: false,
    ignoreTLS: true,
  });
  return (m: { to: string; subject: string; text?: string; from?: string }) =>
    t.sendMail({
      from: m.from ?? 'Alice <alice@far.example>',
      to: m.to,
      subject: m.subject,
      text: m.text ?? `body of ${m.subject}`,
    });
}

/** Mints an app password through the API; answers its row with the secret. */
export async function mintPassword(stack: TestStack, token: string, body: Record<string, unknown>) {
  const res = await stack.api('POST', '/api/app-passwords', { token, body });
  if (res.status !== 201) throw new Error(`app password: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as { id: string; secret: string; address: string; protocols: string[] };
}
