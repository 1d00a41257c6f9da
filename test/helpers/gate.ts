import { eq } from 'drizzle-orm';
import { schema } from '../../db/index.js';
import { SERVICE, type SendingStack } from './sending.js';

/** Plans of the send-gate suites: `free` leaves room; the others are the caps under test. */
export const GATE_PLANS = {
  free: { includedEmails: 100_000, dailySendCap: 10_000, overage: 'block', paid: false },
  tiny: { includedEmails: 1000, dailySendCap: 2, overage: 'block', paid: false },
  five: { includedEmails: 1000, dailySendCap: 5, overage: 'block', paid: false },
  ten: { includedEmails: 1000, dailySendCap: 10, overage: 'block', paid: false },
  month: { includedEmails: 2, dailySendCap: null, overage: 'block', paid: false },
};

/**
 * A new account of the stack with its own hosted sender domain `<label>.send.svc.test` (verified for
 * sending and receiving at once), on `plan`, with its email verified or not; its account key and session.
 */
export async function gateAccount(
  env: SendingStack,
  label: string,
  opts: { plan?: keyof typeof GATE_PLANS; verified?: boolean } = {},
) {
  const { stack } = env;
  const db = stack.service.core.db;
  const signup = await stack.api('POST', '/api/auth/signup', {
    body: { email: `${label}@owners.example`, password: 'a gate password' },
  });
  if (signup.status !== 201) throw new Error(`signup: ${JSON.stringify(signup.body)}`);
  const userId: string = signup.body.user.id;
  const session: string = signup.body.token;
  const claimed = await stack.api('POST', '/api/domains/subdomain', { token: session, body: { subdomain: label } });
  if (claimed.status >= 300) throw new Error(`subdomain: ${JSON.stringify(claimed.body)}`);
  await db
    .update(schema.users)
    .set({ emailVerified: opts.verified ?? true, plan: opts.plan ?? 'free' })
    .where(eq(schema.users.id, userId));
  const key: string = (await stack.api('GET', '/api/keys', { token: session })).body.key;
  const domain = `${label}.${SERVICE}`;
  const api = (method: string, path: string, body?: unknown, token = key) => stack.api(method, path, { token, body });
  return {
    userId,
    session,
    key,
    domain,
    domainId: claimed.body.domain.id as string,
    api,
    send: (body: Record<string, unknown>, token = key) =>
      api('POST', '/v1/send', { from: `Gate <hello@${domain}>`, subject: 'Hi', text: 'Hello', ...body }, token),
    /** Changes the account's standing behind the API's back (an operator suspends; verification cannot be undone through it). */
    setStanding: (v: { emailVerified?: boolean; suspendedAt?: number | null }) =>
      db.update(schema.users).set(v).where(eq(schema.users.id, userId)),
    /** This account's outbound message rows. */
    outbound: () =>
      db
        .select()
        .from(schema.messages)
        .where(eq(schema.messages.userId, userId))
        .then((rows) => rows.filter((r) => r.direction === 'outbound' && r.kind === 'user')),
  };
}
export type GateAccount = Awaited<ReturnType<typeof gateAccount>>;

/** Addresses the sink received mail for, among `addresses`. */
export const receivedBy = (env: SendingStack, addresses: string[]) =>
  env.sink.received.flatMap((r) => r.to).filter((a) => addresses.includes(a));

/**
 * Waits out the last minute of a UTC day: a test that counts today's sends against a later step (a
 * fan-out, a sequence step) must not straddle midnight, when the daily counter starts again.
 */
export async function clearOfMidnight(): Promise<void> {
  const now = new Date();
  const left = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1) - now.getTime();
  if (left < 60_000) await new Promise((r) => setTimeout(r, left + 1000));
}
