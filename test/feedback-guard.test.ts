import { Client, Connection } from '@temporalio/client';
import { and, eq, sql } from 'drizzle-orm';
import nodemailer from 'nodemailer';
import MimeNode from 'nodemailer/lib/mime-node/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schema } from '../db/index.js';
import { progressQuery } from '../workflows/broadcast.js';
import { broadcastWorkflowId, domainGuardWorkflowId } from '../workflows/ids.js';
import { judge, type GuardSettings } from '../core/feedback/rates.js';
import { broadcastHelpers } from './helpers/broadcasts.js';
import { sequenceHelpers } from './helpers/sequences.js';
import { FROM_DOMAIN, startSendingStack, type SendingStack } from './helpers/sending.js';
import type { Received } from './helpers/smtp-sink.js';
import { eventually } from './helpers/stack.js';
import { startWebhookReceiver } from './helpers/webhook-receiver.js';

const OPERATOR = 'operator-token-0123456789abcdef';
let env: SendingStack;
let h: ReturnType<typeof broadcastHelpers>;
let hooks: Awaited<ReturnType<typeof startWebhookReceiver>>;
let temporal: Client;
let connection: Connection;
beforeAll(async () => {
  // Batches of 20 at 5 recipients/s to rcpt.test, one in flight: each batch waits about 4 s between being
  // queued and leaving, so a pause usually finds one queued (held at departure). The guard judges a 24 h
  // window from 20 delivered (0.3% pauses, 0.1% warns).
  env = await startSendingStack({
    env: {
      BROADCAST_BATCH_SIZE: '20',
      BROADCAST_CONCURRENCY: '1',
      BROADCAST_DOMAIN_RATE: '5',
      BROADCAST_FOOTER_ADDRESS: '1 Main St, Springfield',
      GUARD_MIN_VOLUME: '20',
      GUARD_WINDOWS_HOURS: '24,168',
      OPERATOR_TOKEN: OPERATOR,
      PLANS: JSON.stringify({ free: { includedEmails: 100_000, dailySendCap: 10_000, overage: 'block', paid: false } }),
    },
  });
  h = broadcastHelpers(env);
  hooks = await startWebhookReceiver();
  connection = await Connection.connect({ address: env.stack.service.temporalAddress });
  temporal = new Client({ connection });
});
afterAll(async () => {
  await connection?.close();
  await hooks?.close();
  await env?.stop();
});

/** An RFC 5965 abuse report of a received copy, sent over SMTP to its return path (the ingress applies it before its 250). */
async function complain(got: Received) {
  const root = new MimeNode('multipart/report; report-type=feedback-report');
  root.setHeader({ from: 'fbl@isp.rcpt.test', to: got.from, subject: 'Abuse report' });
  root.createChild('text/plain').setContent('This is an email abuse report.\r\n');
  root
    .createChild('message/feedback-report')
    .setContent(
      `Feedback-Type: abuse\r\nUser-Agent: RcptFBL/1.0\r\nVersion: 1\r\nOriginal-Mail-From: <${got.from}>\r\nOriginal-Rcpt-To: <${got.to[0]}>\r\n`,
    );
  root.createChild('message/rfc822').setContent(got.raw);
  const smtp = nodemailer.createTransport({
    host: '127.0.0.1',
    port: env.stack.service.smtpPort!,
    secure: false,
    ignoreTLS: true,
  });
  try {
    await smtp.sendMail({ envelope: { from: '', to: [got.from] }, raw: await root.build() });
  } finally {
    smtp.close();
  }
}

const copiesOf = (prefix: string) => [...h.copies(prefix).values()].reduce((a, n) => a + n, 0);

describe('the complaint guard', () => {
  it('pauses a broadcast mid-way on complaints, keeps transactional mail going, and resumes it on the call', async () => {
    const db = env.stack.service.core.db;
    const domains = (await env.stack.api('GET', '/api/domains', { token: env.session })).body;
    const dom = domains.find((d: any) => d.domain === FROM_DOMAIN);
    // A catch-all webhook that opted in to nothing: the pause event goes to it all the same.
    const hook = await env.stack.api('PUT', `/api/domains/${dom.id}/webhook`, {
      token: env.session,
      body: { url: `${hooks.base}/catch-all` },
    });
    expect(hook.status, JSON.stringify(hook.body)).toBe(200);
    hooks.secret('/catch-all', hook.body.signingSecret);

    const { list } = await h.listOf('g', 200);
    const b = await h.draft({ name: 'Guarded', audience: { type: 'list', id: list.id } });
    expect((await h.api('POST', `/api/broadcasts/${b.id}/send`, {})).status).toBe(202);

    // Two recipients of the first copies complain: 2 of at least 30 delivered is far above 0.3%.
    await eventually(async () => copiesOf('g') >= 30, 30_000, 20);
    const early = env.sink.received.filter((r) => r.to[0]?.startsWith('g-')).slice(0, 2);
    for (const got of early) await complain(got);

    const domain = async () =>
      (await env.stack.api('GET', `/api/domains/${dom.id}`, { token: env.session })).body.domain;
    await eventually(async () => (await domain()).feedback.bulk_paused_at, 20_000, 100);
    const paused = await domain();
    expect(paused.feedback.bulk_paused_at).toBeGreaterThan(0);
    expect(paused.feedback.bulk_paused_reason).toMatch(
      /^complaint rate .* over 24 h .* above the pause threshold 0\.30%$/,
    );
    expect(paused.feedback.windows[0]).toMatchObject({ hours: 24, complained: 2 });
    expect(paused.feedback.windows[0].delivered).toBeGreaterThanOrEqual(30);
    expect(paused.feedback.warning).toMatch(/complaint rate/);
    // The broadcast stops where it is: the batch it had queued is held as it comes to leave, or (when the
    // pause came between batches) the workflow waits before queueing the next one.
    const broadcastRows = () =>
      db
        .select({ status: schema.messages.status, trail: schema.messages.trail })
        .from(schema.messages)
        .where(sql`${schema.messages.metadata} ->> 'broadcast_id' = ${b.id}`);
    const progress = () => temporal.workflow.getHandle(broadcastWorkflowId(b.id)).query(progressQuery);
    await eventually(
      async () =>
        (await broadcastRows()).some((r) => r.trail?.some((t) => t.response.includes('bulk mail is paused'))) ||
        (await progress()).phase === 'paused',
      30_000,
      100,
    );
    const atPause = copiesOf('g');
    expect(atPause).toBeLessThan(200);

    // The pause event reaches the catch-all webhook, signed, in its published shape (the receiver checks it).
    const [event] = await hooks.waitFor('/catch-all');
    expect(event!.verified).toBe(true);
    expect(event!.json).toMatchObject({
      type: 'domain.sending_paused',
      data: { domainId: dom.id, domain: FROM_DOMAIN, pausedAt: paused.feedback.bulk_paused_at },
    });

    // Transactional mail from the same domain still leaves while the broadcast waits.
    const sent = await env.send({ to: 'receipt@rcpt.test', subject: 'Your receipt' });
    expect(sent.status, JSON.stringify(sent.body)).toBeLessThan(300);
    await eventually(async () => env.sink.received.some((r) => r.to.includes('receipt@rcpt.test')), 20_000);
    // Of the broadcast, only what left before the pause is sent (a copy of the batch in flight waits at departure).
    const sentRows = await db
      .select({ n: sql<number>`count(*)::int` })
      .from(schema.messages)
      .where(
        and(
          eq(schema.messages.domainId, dom.id),
          sql`${schema.messages.metadata} ->> 'broadcast_id' = ${b.id}`,
          eq(schema.messages.status, 'sent'),
        ),
      );
    expect(sentRows[0]!.n).toBe(atPause);
    expect(copiesOf('g')).toBe(atPause); // nothing more left

    // The guard is a workflow per domain, visible in Temporal.
    const guard = await temporal.workflow.getHandle(domainGuardWorkflowId(dom.id)).describe();
    expect(guard.type).toBe('domainGuardWorkflow');
    expect(guard.status.name).toBe('RUNNING');

    // Another tenant cannot resume it (404, as if the domain did not exist); the owner can.
    const other = (
      await env.stack.api('POST', '/api/auth/signup', {
        body: { email: 'other@example.com', password: 'other password' },
      })
    ).body.token;
    const otherKey = (await env.stack.api('GET', '/api/keys', { token: other })).body.key;
    const refused = await env.stack.api('POST', `/api/domains/${dom.id}/resume-sending`, { token: otherKey });
    expect(refused.status).toBe(404);
    expect(copiesOf('g')).toBe(atPause);

    const resumedAt = Date.now();
    const resumed = await env.stack.api('POST', `/api/domains/${dom.id}/resume-sending`, { token: env.key });
    expect(resumed.status, JSON.stringify(resumed.body)).toBe(200);
    expect(resumed.body).toMatchObject({
      domainId: dom.id,
      feedback: { bulk_paused_at: null, bulk_paused_reason: null },
    });

    // It carries on from where it stopped, and the old complaints do not pause it again.
    const done = await h.finished(b.id, 120_000);
    expect(done).toMatchObject({ status: 'sent', sent_count: 200, fail_count: 0, skip_count: 0 });
    const copies = h.copies('g');
    expect(copies.size).toBe(200);
    expect([...copies.values()].every((n) => n === 1)).toBe(true);
    expect((await domain()).feedback.bulk_paused_at).toBeNull();
    // No copy left while paused (a transaction begun as the pause came may end just after it).
    const rows = await broadcastRows();
    const pausedAt = paused.feedback.bulk_paused_at as number;
    const duringPause = rows
      .flatMap((r) => r.trail ?? [])
      .filter((t) => t.status === 'sent' && t.at > pausedAt + 1000 && t.at < resumedAt);
    expect(duringPause).toEqual([]);
    expect(hooks.hitsOn('/catch-all').filter((x) => x.json?.type === 'domain.sending_paused')).toHaveLength(1);
  });

  it('holds a broadcast started on a paused domain at its first batch and a sequence email at departure, until an operator resumes', async () => {
    const domains = (await env.stack.api('GET', '/api/domains', { token: env.session })).body;
    const dom = domains.find((d: any) => d.domain === FROM_DOMAIN);
    const domain = async () =>
      (await env.stack.api('GET', `/api/domains/${dom.id}`, { token: env.session })).body.domain;
    // Fresh complaints after the first test's resume (the guard judges only what came after it) pause it again.
    const before = hooks.hitsOn('/catch-all').length;
    const later = env.sink.received.filter((r) => r.to[0]?.startsWith('g-')).slice(-2);
    for (const got of later) await complain(got);
    await eventually(async () => (await domain()).feedback.bulk_paused_at, 20_000, 100);
    await hooks.waitFor('/catch-all', before + 1);

    const { list } = await h.listOf('p', 30);
    const b = await h.draft({ name: 'Held', audience: { type: 'list', id: list.id } });
    expect((await h.api('POST', `/api/broadcasts/${b.id}/send`, {})).status).toBe(202);
    const progress = () => temporal.workflow.getHandle(broadcastWorkflowId(b.id)).query(progressQuery);
    await eventually(async () => (await progress()).phase === 'paused', 20_000, 100);
    expect(await progress()).toMatchObject({ sent: 0, remaining: 30 });
    const queued = await env.stack.service.core.db
      .select({ n: sql<number>`count(*)::int` })
      .from(schema.messages)
      .where(sql`${schema.messages.metadata} ->> 'broadcast_id' = ${b.id}`);
    expect(queued[0]!.n).toBe(0); // nothing was even queued

    // A sequence's email is queued and held as it is about to leave: a trail entry says why, it stays queued.
    const seqs = sequenceHelpers(env);
    const seq = await seqs.sequence({
      name: 'Welcome',
      trigger: { type: 'event', event: 'joined' },
      steps: [{ type: 'send', subject: 'Welcome aboard', text: 'Hi' }],
    });
    await seqs.contact('seq-1@rcpt.test');
    await seqs.event({ name: 'joined', email: 'seq-1@rcpt.test' });
    const heldRow = await eventually(async () => {
      const [row] = await env.stack.service.core.db
        .select()
        .from(schema.messages)
        .where(sql`${schema.messages.metadata} ->> 'sequence_id' = ${seq.id}`);
      return row?.trail?.some((t) => t.response.includes('bulk mail is paused')) ? row : undefined;
    }, 20_000);
    expect(heldRow.status).toBe('queued');
    expect(env.sink.received.some((r) => r.to.includes('seq-1@rcpt.test'))).toBe(false);

    const url = `${env.stack.baseUrl}/api/operator/domains/${dom.id}/resume-sending`;
    expect((await fetch(url, { method: 'POST', headers: { authorization: 'Bearer wrong' } })).status).toBe(401);
    const res = await fetch(url, { method: 'POST', headers: { authorization: `Bearer ${OPERATOR}` } });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ domainId: dom.id, feedback: { bulk_paused_at: null } });

    // The resume wakes the waiting broadcast (its next look would be 10 s away): every contact once.
    const done = await h.finished(b.id, 30_000);
    expect(done).toMatchObject({ status: 'sent', sent_count: 30 });
    const copies = h.copies('p');
    expect(copies.size).toBe(30);
    expect([...copies.values()].every((n) => n === 1)).toBe(true);
    // The held sequence email leaves at its next look (10 s after it was held at most).
    await eventually(async () => env.sink.received.some((r) => r.to.includes('seq-1@rcpt.test')), 30_000);
  });
});

describe('judging the rates', () => {
  const s: GuardSettings = {
    complaintRate: 0.003,
    complaintWarnRate: 0.001,
    bounceRate: 0.08,
    bounceWarnRate: 0.04,
    windowsHours: [24, 168],
    minVolume: 500,
  };
  const HOUR = 3_600_000;
  const now = 1_000 * HOUR + 1234;
  const at = (hoursAgo: number, delivered: number, complained: number, bounced = 0) => ({
    hour: (1_000 - hoursAgo) * HOUR,
    delivered,
    complained,
    bounced,
  });

  it('warns between the warning and pause rates, pauses above, and judges no window under the minimum volume', () => {
    expect(judge([at(0, 1000, 2)], s, now)).toMatchObject({
      pause: null,
      warning: expect.stringMatching(/^complaint rate 0\.20% over 24 h/),
    });
    expect(judge([at(0, 1000, 4)], s, now).pause).toMatch(/^complaint rate 0\.40% over 24 h \(1000 delivered\)/);
    expect(judge([at(0, 499, 100)], s, now)).toMatchObject({ pause: null, warning: null });
    // Old complaints fall out of the 24 h window but stay in the 7-day one.
    expect(judge([at(30, 1000, 4)], s, now).pause).toMatch(/over 168 h/);
    expect(judge([at(0, 1000, 0, 100)], s, now).pause).toMatch(/^hard-bounce rate 9\.09% over 24 h/);
  });

  it('after a resume, counts only what came after it (that hour less its counts at the resume)', () => {
    const hours = [at(2, 1000, 50), at(0, 1500, 10)];
    expect(judge(hours, s, now).pause).toMatch(/complaint rate/);
    const since = { at: now - 10, hour: 1_000 * HOUR, base: { delivered: 900, complained: 10, bounced: 0 } };
    expect(judge(hours, s, now, since)).toMatchObject({
      pause: null,
      windows: [{ delivered: 600, complained: 0 }, { delivered: 600 }],
    });
  });
});
