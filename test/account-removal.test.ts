import { and, eq } from 'drizzle-orm';
import nodemailer from 'nodemailer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schema } from '../db/index.js';
import { approveOverHttp, authorizeUrl, pkce, registerClient, tokenRequest } from './helpers/oauth.js';
import { tokenFromMail, waitForMail } from './helpers/outbox.js';
import { eventually, startStack, type TestStack } from './helpers/stack.js';
import { changedTables, tableCounts } from './helpers/table-counts.js';
import { startWebhookReceiver } from './helpers/webhook-receiver.js';

/**
 * Removing an account ("I did not ask for this") leaves no row of it in any table. The oracle is its own:
 * a `count(*)` of every table in the schema (helpers/table-counts.ts), taken while the database holds only
 * another account's data, compared after the doomed account filled every area and was removed.
 */
const SERVICE = 'removal.svc.test';
const REDIRECT = 'http://127.0.0.1:9/removal/cb';
let stack: TestStack;
let hooks: Awaited<ReturnType<typeof startWebhookReceiver>>;
let clientId: string;

/**
 * Tables no account owns: the service's own domains, the OAuth apps (registered by an app, not by an
 * account), shaping state per destination site, and the abuse guards' windows (keyed by address or IP:
 * removing an account must not reset them). Their counts are not compared.
 */
const SHARED = new Set([
  'service_domains',
  'oauth_clients',
  'shaping_sites',
  'shaping_leases',
  'shaping_actions',
  'rate_limit_windows',
  // The TLS outcome of outbound sessions per recipient domain, and the reports sent about them: the platform's.
  'tls_outcomes',
  'tls_report_sends',
  // Recipient domains' MTA-STS policies (the platform's cache), and the outcomes per egress source, which the
  // worker writes every few seconds for every account (the doomed account's own rows are checked apart).
  'mta_sts_policies',
  'egress_counters',
]);

const ok = <T>(res: { status: number; body: T }) => {
  expect(res.status, JSON.stringify(res.body)).toBeLessThan(300);
  return res.body as any;
};
const verified = (userId: string, value: boolean) =>
  stack.service.core.db.update(schema.users).set({ emailVerified: value }).where(eq(schema.users.id, userId));
const inbound = (to: string, subject: string) =>
  nodemailer
    .createTransport({ host: '127.0.0.1', port: stack.service.smtpPort!, secure: false, ignoreTLS: true })
    .sendMail({ from: 'Far Sender <far@far.example>', to, subject, text: 'hello' });
const contactsOf = async (token: string) =>
  (ok(await stack.api('GET', '/api/contacts?limit=100', { token })) as { email: string }[]).map((c) => c.email);
const statusOf = async (token: string, id: string) => ok(await stack.api('GET', `/api/messages/${id}`, { token }));

/** A verified account with a domain, a send that went out, inbound mail delivered to its webhook, a contact. */
async function keeper() {
  const s = ok(
    await stack.api('POST', '/api/auth/signup', { body: { email: 'keeper@example.com', password: 'keeper password' } }),
  );
  await verified(s.user.id, true);
  const domain = ok(
    await stack.api('POST', '/api/domains/subdomain', { token: s.token, body: { subdomain: 'keeper' } }),
  ).domain;
  const key = ok(await stack.api('GET', '/api/keys', { token: s.token })).key as string;
  const hook = ok(
    await stack.api('PUT', `/api/domains/${domain.id}/webhook`, {
      token: s.token,
      body: { url: `${hooks.base}/keeper` },
    }),
  );
  hooks.secret('/keeper', hook.signingSecret);
  ok(await stack.api('POST', '/api/contacts', { token: s.token, body: { email: 'kept-contact@example.com' } }));
  const sent = ok(
    await stack.api('POST', '/v1/send', {
      token: key,
      body: { from: `hi@keeper.${SERVICE}`, to: 'friend@rcpt.test', subject: 'kept', text: 'x' },
    }),
  );
  await inbound(`in@keeper.${SERVICE}`, 'kept inbound');
  const [hit] = await hooks.waitFor('/keeper');
  await eventually(async () => (await statusOf(s.token, sent.id)).message.status === 'sent');
  await eventually(async () => (await statusOf(s.token, hit!.json.id)).deliveries?.[0]?.status === 'delivered');
  // Contacts from traffic are written a moment later (group-committed): wait for both.
  await eventually(async () => {
    const c = await contactsOf(s.token);
    return c.includes('friend@rcpt.test') && c.includes('far@far.example');
  });
  return { session: s.token as string, key, userId: s.user.id as string, domainId: domain.id as string };
}

/** Everything an account can hold, in every area; answers what to wait on before the removal. */
async function fillDoomed() {
  const email = 'doomed@example.com';
  const s = ok(await stack.api('POST', '/api/auth/signup', { body: { email, password: 'doomed password' } }));
  const token = s.token as string;
  const verifyToken = tokenFromMail((await waitForMail(stack, email, /Verify/)).raw);
  // Verified for now, so it can send and fill the sending tables too; the removal itself is of an unverified account.
  await verified(s.user.id, true);
  const key = ok(await stack.api('GET', '/api/keys', { token })).key as string;
  const domain = ok(await stack.api('POST', '/api/domains/subdomain', { token, body: { subdomain: 'doomed' } })).domain;
  const from = `hello@doomed.${SERVICE}`;
  ok(await stack.api('POST', '/api/keys/scoped', { token, body: { domainId: domain.id, name: 'ci' } }));
  const pw = ok(
    await stack.api('POST', '/api/app-passwords', { token, body: { domainId: domain.id, protocols: ['imap', 'api'] } }),
  );
  const hook = ok(
    await stack.api('PUT', `/api/domains/${domain.id}/webhook`, { token, body: { url: `${hooks.base}/doomed` } }),
  );
  hooks.secret('/doomed', hook.signingSecret);
  ok(
    await stack.api('POST', '/api/routes', {
      token,
      body: { domainId: domain.id, address: 'ops', url: `${hooks.base}/doomed-ops` },
    }),
  );
  ok(
    await stack.api('PUT', `/api/domains/${domain.id}/tracking-webhook`, {
      token,
      body: { url: `${hooks.base}/doomed-track` },
    }),
  );
  ok(await stack.api('PUT', `/api/domains/${domain.id}/warmup`, { token, body: { schedule: [50, 100] } }));
  ok(
    await stack.api('POST', '/api/templates', {
      token,
      body: { name: 'doomed', subject: 'Hi', text: 'template text' },
    }),
  );
  ok(
    await stack.api('POST', '/api/contacts/suppressions', {
      token,
      body: { email: 'suppressed@rcpt.test', reason: 'manual' },
    }),
  );
  const contact = ok(await stack.api('POST', '/api/contacts', { token, body: { email: 'doomed-contact@rcpt.test' } }));
  const list = ok(await stack.api('POST', '/api/lists', { token, body: { name: 'doomed list' } }));
  ok(await stack.api('POST', `/api/lists/${list.id}/contacts`, { token, body: { contactIds: [contact.id] } }));
  const imported = ok(
    await stack.api('POST', `/api/lists/${list.id}/import`, {
      token,
      body: { csv: 'email\nimported-1@rcpt.test\nimported-2@rcpt.test\n' },
    }),
  );
  ok(
    await stack.api('POST', '/v1/attachments', {
      token: key,
      body: { filename: 'notes.txt', content: Buffer.from('notes').toString('base64') },
    }),
  );

  // Mail out (with an idempotency key and a scheduled one), mail in, a broadcast, a sequence waiting on an event.
  const sent = ok(
    await stack.api('POST', '/v1/send', {
      token: key,
      headers: { 'Idempotency-Key': 'doomed-1' },
      body: {
        from,
        to: 'out@rcpt.test',
        subject: 'out',
        html: '<a href="https://example.com/">x</a>',
        trackClicks: true,
        trackOpens: true,
      },
    }),
  );
  const later = ok(
    await stack.api('POST', '/v1/send', {
      token: key,
      body: { from, to: 'later@rcpt.test', subject: 'later', text: 't', scheduledAt: 'in 2 hours' },
    }),
  );
  await inbound(`someone@doomed.${SERVICE}`, 'doomed inbound');
  const [hit] = await hooks.waitFor('/doomed');
  const broadcast = ok(
    await stack.api('POST', '/api/broadcasts', {
      token,
      body: { from: `news@doomed.${SERVICE}`, subject: 'news', text: 'x', audience: { type: 'list', id: list.id } },
    }),
  );
  ok(await stack.api('POST', `/api/broadcasts/${broadcast.id}/send`, { token, body: {} }));
  const sequence = ok(
    await stack.api('POST', '/api/sequences', {
      token,
      body: {
        name: 'doomed drip',
        status: 'active',
        from: `drip@doomed.${SERVICE}`,
        trigger: { type: 'event', event: 'start' },
        steps: [
          { type: 'send', subject: 'welcome', text: 'w' },
          { type: 'wait_for_event', event: 'never', timeout: '1h' },
        ],
      },
    }),
  );
  ok(
    await stack.api('POST', '/v1/events', {
      token: key,
      body: { name: 'start', contactId: contact.id, payload: { x: 1 } },
    }),
  );

  // A linked app: a grant with its tokens, and a code never exchanged.
  const { verifier, challenge } = pkce();
  const back = await approveOverHttp(stack, authorizeUrl(stack, { clientId, redirectUri: REDIRECT, challenge }), {
    email,
    password: 'doomed password',
  });
  ok(
    await tokenRequest(stack, {
      grant_type: 'authorization_code',
      code: back.searchParams.get('code')!,
      redirect_uri: REDIRECT,
      client_id: clientId,
      code_verifier: verifier,
    }),
  );
  await approveOverHttp(stack, authorizeUrl(stack, { clientId, redirectUri: REDIRECT, challenge: pkce().challenge }), {
    email,
    password: 'doomed password',
  });

  // Wait until what the account started is over (or waits on a long timer): nothing of it is written after the removal.
  await eventually(async () => (await statusOf(token, sent.id)).message.status === 'sent');
  await eventually(async () => (await statusOf(token, hit!.json.id)).deliveries?.[0]?.status === 'delivered');
  await eventually(
    async () => ok(await stack.api('GET', `/api/lists/${list.id}/imports/${imported.id}`, { token })).status === 'done',
  );
  await eventually(async () =>
    ['sent', 'failed'].includes(ok(await stack.api('GET', `/api/broadcasts/${broadcast.id}`, { token })).status),
  );
  await eventually(
    async () =>
      (ok(await stack.api('GET', `/api/sequences/${sequence.id}/enrolments`, { token })) as any[])[0]?.waitingFor ===
      'never',
  );
  await eventually(
    async () => (ok(await stack.api('GET', '/api/mailbox/messages', { token: pw.secret })).messages ?? []).length > 0,
  );
  await eventually(async () => {
    const c = await contactsOf(token);
    return c.includes('out@rcpt.test') && c.includes('far@far.example');
  });
  // Every outbound message of the account (the sends, the broadcast's, the sequence's, the mailed link) is out.
  await eventually(async () => {
    const rows = await stack.service.core.db
      .select({ status: schema.messages.status })
      .from(schema.messages)
      .where(and(eq(schema.messages.userId, s.user.id), eq(schema.messages.direction, 'outbound')));
    return rows.length >= 5 && rows.every((m) => ['sent', 'failed', 'scheduled'].includes(m.status));
  });
  return {
    userId: s.user.id as string,
    verifyToken,
    importId: imported.id as string,
    domainId: domain.id as string,
    scheduledMessageId: ok(await stack.api('GET', `/v1/scheduled/${later.id}`, { token: key })).messageId as string,
  };
}

/** Rows no API call leaves behind at rest, written as the service writes them mid-way. */
async function fillMidway(doomed: { userId: string; importId: string; domainId: string; scheduledMessageId: string }) {
  const db = stack.service.core.db;
  const now = Date.now();
  // An import whose rows are staged and not applied yet (the workflow deletes them as it goes).
  await db.insert(schema.contactImportRows).values({ importId: doomed.importId, seq: 99, email: 'staged@rcpt.test' });
  // A warming domain's count for a site (kept per day of the plan).
  await db
    .insert(schema.warmupCounts)
    .values({ domainId: doomed.domainId, site: 'far.example', day: 1, sent: 1 })
    .onConflictDoNothing();
  // A process's leased cap allowance (core/gate/cap-lease.ts), not given back yet.
  await db.insert(schema.capLeases).values({
    id: 'cpl_doomed',
    userId: doomed.userId,
    day: 'd:2026-01-01',
    month: 'm:2026-01',
    holder: 'doomed-holder',
    amount: 5,
    expiresAt: now + 30_000,
  });
  // A send's enrolment held until its message is delivered (the scheduled one).
  await db.insert(schema.sequenceOutbox).values({
    id: 'sqo_doomeddoomeddoomeddoomed',
    userId: doomed.userId,
    kind: 'send',
    data: {},
    createdAt: now,
    messageId: doomed.scheduledMessageId,
    email: 'later@rcpt.test',
    held: true,
  });
  // Reports receivers mailed about the domain (docs/feedback.md), as the ingress stores them.
  const report = { userId: doomed.userId, domainId: doomed.domainId, reporter: 'google.com', reportId: 'doomed' };
  const range = { beginAt: now - 86_400_000, endAt: now, receivedAt: now };
  await db.insert(schema.dmarcReports).values({ id: 'dmr_doomed', ...report, ...range, records: 1, messages: 2 });
  await db.insert(schema.dmarcRows).values({
    reportId: 'dmr_doomed',
    idx: 0,
    userId: doomed.userId,
    domainId: doomed.domainId,
    reporter: 'google.com',
    day: now - (now % 86_400_000),
    sourceIp: '192.0.2.1',
    headerFrom: `doomed.${SERVICE}`,
    count: 2,
    disposition: 'none',
    dkimAligned: true,
    spfAligned: true,
  });
  await db
    .insert(schema.tlsReports)
    .values({ id: 'tlr_doomed', ...report, ...range, success: 1, failure: 0, policies: [] });
  // A sender rule of the domain's inbound policy (docs/inbound-policy.md).
  await db.insert(schema.senderRules).values({
    id: 'sbr_doomeddoomeddoomeddoomed',
    userId: doomed.userId,
    domainId: doomed.domainId,
    kind: 'address',
    value: 'pest@far.example',
    action: 'block',
    createdAt: now,
  });
  // A pool an operator assigned to the account, and its outcomes by egress source (docs/egress.md).
  await db
    .insert(schema.egressAssignments)
    .values({ userId: doomed.userId, stream: 'all', pool: 'bulk', updatedAt: now });
  await db.insert(schema.egressCounters).values({
    userId: doomed.userId,
    domainId: doomed.domainId,
    source: 'default',
    pool: 'transactional',
    hour: now - (now % 3_600_000),
    sent: 3,
  });
  // A domain bought through the registrar.
  await db.insert(schema.domainRegistrations).values({
    id: `reg_doomed`,
    userId: doomed.userId,
    domain: 'doomed-bought.com',
    registrar: 'test',
    status: 'registered',
    years: 1,
    amount: 1000,
    currency: 'USD',
    contact: { name: 'x' },
    createdAt: now,
  });
}

beforeAll(async () => {
  hooks = await startWebhookReceiver();
  stack = await startStack({ SERVICE_DOMAIN: SERVICE, WEBHOOK_RETRY_SCHEDULE: '300,300' });
  clientId = (await registerClient(stack, [REDIRECT], 'Removal app')).client_id;
});
afterAll(async () => {
  await stack?.stop();
  await hooks?.close();
});

describe('removing an account', () => {
  it('every table is back to its count from before the account existed; the other account keeps its rows', async () => {
    const kept = await keeper();
    const baseline = await tableCounts(stack.service.core.db);
    const doomed = await fillDoomed();
    await fillMidway(doomed);
    const filled = await tableCounts(stack.service.core.db);
    // The oracle sees every area: each table that holds account data gained rows (fill a table added later here too).
    const empty = Object.keys(filled).filter((t) => !SHARED.has(t) && filled[t]! <= baseline[t]!);
    expect(empty, 'tables the doomed account put no row in').toEqual([]);

    await verified(doomed.userId, false);
    expect(ok(await stack.api('POST', '/api/auth/disown', { body: { token: doomed.verifyToken } }))).toMatchObject({
      deleted: true,
    });

    const after = await tableCounts(stack.service.core.db);
    const doomedOutcomes = await stack.service.core.db
      .select()
      .from(schema.egressCounters)
      .where(eq(schema.egressCounters.userId, doomed.userId));
    expect(doomedOutcomes).toEqual([]);
    const changed = changedTables(baseline, after);
    for (const t of SHARED) delete changed[t];
    expect(changed, 'tables whose count differs from before the account existed: [before, after]').toEqual({});
    // The other account still works and still has what it had.
    expect(ok(await stack.api('GET', '/v1/me', { token: kept.key }))).toMatchObject({ email: 'keeper@example.com' });
    expect(await contactsOf(kept.session)).toEqual(
      expect.arrayContaining(['kept-contact@example.com', 'friend@rcpt.test', 'far@far.example']),
    );
    expect(ok(await stack.api('GET', `/api/domains/${kept.domainId}`, { token: kept.session })).domain.domain).toBe(
      `keeper.${SERVICE}`,
    );
  }, 120_000);
});
