import { eq } from 'drizzle-orm';
import { schema } from '../../db/index.js';
import { startTestDns } from './dns.js';
import { freePort } from './ports.js';
import { startSmtpSink } from './smtp-sink.js';
import type { Role } from '../../runtime/service.js';
import { startStack } from './stack.js';

export const SERVICE = 'send.svc.test';
export const FROM_DOMAIN = `acme.${SERVICE}`;

/**
 * The service in OUTBOUND_MODE=mx against real peers: a loopback DNS server publishing `rcpt.test`'s
 * MX, an SMTP sink as that MX, the built-in DNS server for the hosted sender domain, and a verified
 * account with the sending domain `acme.send.svc.test` and its account key.
 */
export async function startSendingStack(
  opts: {
    onRcpt?: (address: string, peer: string) => { code: number; message: string } | undefined;
    env?: Record<string, string>;
    roles?: Role[];
    sinkDelayMs?: number;
  } = {},
) {
  const sink = await startSmtpSink({ onRcpt: opts.onRcpt, delayMs: opts.sinkDelayMs });
  const dns = await startTestDns();
  dns.zone.set('rcpt.test', 'MX', [{ value: 'sink.rcpt.test', priority: 10 }]);
  dns.zone.set('sink.rcpt.test', 'A', [{ value: '127.0.0.1' }]);
  const dnsPort = await freePort();
  const stack = await startStack(
    {
      OUTBOUND_MODE: 'mx',
      MX_PORT: String(sink.port),
      DNS_SERVERS: dns.server.address,
      SERVICE_DOMAIN: SERVICE,
      DNS_PORT: String(dnsPort),
      ATTACHMENT_FETCH_ALLOW_PRIVATE: '1',
      OUTBOUND_RETRY_SCHEDULE: '500,500',
      ...opts.env,
    },
    opts.roles,
  );
  const session = (
    await stack.api('POST', '/api/auth/signup', { body: { email: 'sender@example.com', password: 'sender password' } })
  ).body;
  await stack.service.core.db
    .update(schema.users)
    .set({ emailVerified: true })
    .where(eq(schema.users.id, session.user.id));
  await stack.api('POST', '/api/domains/subdomain', { token: session.token, body: { subdomain: 'acme' } });
  const key: string = (await stack.api('GET', '/api/keys', { token: session.token })).body.key;
  return {
    stack,
    sink,
    dns,
    dnsPort,
    key,
    session: session.token as string,
    send: (body: Record<string, unknown>, token = key) =>
      stack.api('POST', '/v1/send', {
        token,
        body: { from: `Acme <hello@${FROM_DOMAIN}>`, subject: 'Hi', text: 'Hello', ...body },
      }),
    async stop() {
      await stack.stop();
      await sink.close();
      await dns.close();
    },
  };
}
export type SendingStack = Awaited<ReturnType<typeof startSendingStack>>;
