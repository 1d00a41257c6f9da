import nodemailer from 'nodemailer';
import pg from 'pg';
import { startTestDns } from './dns.js';
import { startStack, type TestStack } from './stack.js';

/**
 * A stack that receives mail for `inbox.<service>` (a subdomain of SERVICE_DOMAIN, verified at once) of one
 * new account, with its own DNS server, and SMTP limits high enough for a burst of connections; `probe` is a
 * database client of the test's own (made after the stack: a test that counts the stack's statements knows it).
 */
export async function startInboundStack(service: string, who: string) {
  const dns = await startTestDns();
  const stack: TestStack = await startStack({
    SERVICE_DOMAIN: service,
    DNS_SERVERS: dns.server.address,
    // A burst opens one connection per message.
    SMTP_MAX_CLIENTS_PER_IP: '100',
    SMTP_COMMANDS_PER_MINUTE: '100000',
  });
  const signup = (
    await stack.api('POST', '/api/auth/signup', { body: { email: `${who}@example.com`, password: `${who} password` } })
  ).body;
  const domain = (
    await stack.api('POST', '/api/domains/subdomain', { token: signup.token, body: { subdomain: 'inbox' } })
  ).body.domain;
  const probe = new pg.Client({ connectionString: stack.config.databaseUrl! });
  await probe.connect();
  return {
    dns,
    probe,
    stack,
    token: signup.token as string,
    userId: signup.user.id as string,
    domain: domain as { id: string; domain: string },
    /** A pooled SMTP client of up to `connections` connections to the stack's ingress (no TLS). */
    smtp: (connections: number) =>
      nodemailer.createTransport({
        host: '127.0.0.1',
        port: stack.service.smtpPort!,
        pool: true,
        maxConnections: connections,
        secure: false,
        ignoreTLS: true,
      }),
    async stop() {
      await probe.end();
      await stack.stop();
      await dns.close();
    },
  };
}

/** True once `n` sessions of `client`'s database wait for a lock (another transaction holds a row they want). */
export async function waitingForLocks(client: pg.Client | pg.Pool, n: number): Promise<boolean> {
  const { rows } = await client.query(
    "select count(*)::int as n from pg_stat_activity where wait_event_type = 'Lock' and datname = current_database()",
  );
  return (rows[0] as { n: number }).n === n;
}
