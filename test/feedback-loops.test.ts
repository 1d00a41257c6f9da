import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Ajv } from 'ajv';
import { and, eq, sum } from 'drizzle-orm';
import { dkimVerify } from 'mailauth/lib/dkim/verify.js';
import nodemailer from 'nodemailer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { senderIdOf } from '../core/mail/feedback-id.js';
import { schema } from '../db/index.js';
import { broadcastHelpers, headerOf } from './helpers/broadcasts.js';
import { resolverFor } from './helpers/dns.js';
import { FROM_DOMAIN, SERVICE, startSendingStack, type SendingStack } from './helpers/sending.js';
import { sequenceHelpers } from './helpers/sequences.js';
import type { Received } from './helpers/smtp-sink.js';
import { eventually } from './helpers/stack.js';
import { startWebhookReceiver } from './helpers/webhook-receiver.js';

/**
 * Issue 32, complaints: every outbound message carries a DKIM-signed Feedback-ID naming its domain,
 * account and stream, and feedback-loop reports shaped like the big providers' (test/fixtures/arf), built
 * around a message the platform really sent and sent over SMTP to the ingress, suppress the recipient
 * (`complaint`), record one `email.complained` (webhook included) and count in activity_counters.
 */
const FIXTURES = join(dirname(fileURLToPath(import.meta.url)), 'fixtures', 'arf');
let env: SendingStack;
let hooks: Awaited<ReturnType<typeof startWebhookReceiver>>;
let bh: ReturnType<typeof broadcastHelpers>;
let sh: ReturnType<typeof sequenceHelpers>;
let domainId: string;
let userId: string;

beforeAll(async () => {
  hooks = await startWebhookReceiver();
  env = await startSendingStack({ env: { WEBHOOK_RETRY_SCHEDULE: '300' } });
  bh = broadcastHelpers(env);
  sh = sequenceHelpers(env);
  const db = env.stack.service.core.db;
  domainId = (await db.select().from(schema.domains).where(eq(schema.domains.domain, FROM_DOMAIN)))[0]!.id;
  userId = (await db.select().from(schema.users).where(eq(schema.users.email, 'sender@example.com')))[0]!.id;
  const set = await env.stack.api('PUT', `/api/domains/${domainId}/tracking-webhook`, {
    token: env.session,
    body: { url: `${hooks.base}/tracking` },
  });
  expect(set.status).toBe(200);
  hooks.secret('/tracking', set.body.signingSecret);
});
afterAll(async () => {
  await env?.stop();
  await hooks?.close();
});

const api = (method: string, path: string, body?: unknown) =>
  env.stack.api(method, path, { token: env.session, body }).then((r) => r.body);
/** The msg_ id in a captured message's VERP return path. */
const idOf = (got: Received) => /^bounce\+(msg_[\w-]{24})@/.exec(got.from)![1]!;
const head = (got: Received) => got.raw.toString('latin1').split('\r\n\r\n')[0]!;
/** Every Feedback-ID field of a captured message, unfolded (a long one is folded after its colon). */
const feedbackIds = (got: Received) =>
  head(got)
    .replace(/\r\n[ \t]+/g, ' ')
    .split('\r\n')
    .filter((l) => l.toLowerCase().startsWith('feedback-id:'))
    .map((l) => l.slice('feedback-id:'.length).trim());
const expected = (stream: string, domain = domainId, account = userId) =>
  `${domain}:${account}:${stream}:${senderIdOf(SERVICE)}`;

/** mailauth verifies the signature against the built-in DNS server; answers the signed header names. */
async function verifiedHeaders(got: Received, signingDomain: string): Promise<string[]> {
  const r = resolverFor(`127.0.0.1:${env.dnsPort}`);
  const verdict = await dkimVerify(got.raw, { resolver: ((name: string, rr: string) => r.resolve(name, rr)) as never });
  expect(verdict.results[0]).toMatchObject({ status: { result: 'pass' }, signingDomain });
  return /\bh=([^;]+)/
    .exec(headerOf(got, 'DKIM-Signature')!)![1]!
    .toLowerCase()
    .split(':')
    .map((s) => s.trim());
}

/** RFC 8058 one-click unsubscribe: https and mailto in List-Unsubscribe, the Post header, both signed. */
function expectOneClick(got: Received, signed: string[]) {
  expect(headerOf(got, 'List-Unsubscribe')).toMatch(/^<https?:\/\/[^>\s]+>, <mailto:unsubscribe\+[^>\s]+>$/);
  expect(headerOf(got, 'List-Unsubscribe-Post')).toBe('List-Unsubscribe=One-Click');
  expect(signed).toEqual(expect.arrayContaining(['list-unsubscribe', 'list-unsubscribe-post']));
}

/** A one-contact broadcast to `<prefix>-0@rcpt.test`; answers the copy the MX got. */
async function broadcastCopy(prefix: string): Promise<Received> {
  const { list, emails } = await bh.listOf(prefix, 1);
  const b = await bh.draft({ audience: { type: 'list', id: list.id } });
  await bh.api('POST', `/api/broadcasts/${b.id}/send`, {});
  return env.sink.waitFor((r) => r.to.includes(emails[0]!));
}

/** One message through POST /v1/send, as its MX received it, once delivery recorded it sent. */
async function sendCaptured(to: string, extra: Record<string, unknown> = {}): Promise<Received> {
  const res = await env.send({ to, subject: `About ${to}`, ...extra });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  const got = await env.sink.waitFor((r) => r.to.includes(to));
  await eventually(async () => (await api('GET', `/api/messages/${res.body.id}`)).message?.status === 'sent');
  return got;
}

describe('Feedback-ID', () => {
  it('transactional mail carries the service Feedback-ID, DKIM-signed; a caller header of that name cannot replace it', async () => {
    expect(senderIdOf(SERVICE)).toMatch(/^[a-z0-9]{5,15}$/);
    expect(senderIdOf(SERVICE.toUpperCase())).toBe(senderIdOf(SERVICE));
    const got = await sendCaptured('plain@rcpt.test', {
      headers: { 'feedback-id': 'dom_someoneelse:usr_someoneelse:transactional:forged', 'X-Kept': 'yes' },
    });
    expect(feedbackIds(got)).toEqual([expected('transactional')]);
    expect(headerOf(got, 'X-Kept')).toBe('yes');
    expect(await verifiedHeaders(got, FROM_DOMAIN)).toContain('feedback-id');
  });

  it('a broadcast copy: stream broadcast, one-click unsubscribe, all signed', async () => {
    const got = await broadcastCopy('fid-bc');
    expect(feedbackIds(got)).toEqual([expected('broadcast')]);
    const signed = await verifiedHeaders(got, FROM_DOMAIN);
    expect(signed).toContain('feedback-id');
    expectOneClick(got, signed);
  });

  it('a sequence step: stream sequence, one-click unsubscribe, all signed', async () => {
    await sh.sequence({
      name: 'Feedback-ID',
      trigger: { type: 'event', event: 'fid-start' },
      steps: [{ type: 'send', subject: 'Welcome', text: 'Hi' }],
    });
    await sh.contact('fid-seq@rcpt.test');
    await sh.event({ name: 'fid-start', email: 'fid-seq@rcpt.test' });
    const got = await env.sink.waitFor((r) => r.to.includes('fid-seq@rcpt.test'));
    expect(feedbackIds(got)).toEqual([expected('sequence')]);
    const signed = await verifiedHeaders(got, FROM_DOMAIN);
    expect(signed).toContain('feedback-id');
    expectOneClick(got, signed);
  });

  it('system mail (the verification mail): stream system, signed by the service domain', async () => {
    const signup = await env.stack.api('POST', '/api/auth/signup', {
      body: { email: 'newcomer@rcpt.test', password: 'newcomer password' },
    });
    expect(signup.status).toBe(201);
    const got = await env.sink.waitFor((r) => r.to.includes('newcomer@rcpt.test'));
    expect(feedbackIds(got)).toEqual([expected('system', 'service', signup.body.user.id)]);
    expect(await verifiedHeaders(got, SERVICE)).toContain('feedback-id');
  });
});

/** A fixture with its placeholders filled (templates are stored with LF; mail is CRLF). */
function fill(name: string, vars: Record<string, string>): Buffer {
  const template = readFileSync(join(FIXTURES, name), 'latin1').replace(/\r?\n/g, '\r\n');
  return Buffer.from(
    template.replace(/\{\{([A-Z_]+)\}\}/g, (_, k: string) => {
      if (vars[k] === undefined) throw new Error(`${name}: no value for {{${k}}}`);
      return vars[k];
    }),
    'latin1',
  );
}

/** The captured message with its To header (and its folded lines) redacted, as Yahoo's CFL returns it. */
function redactTo(raw: Buffer): string {
  const text = raw.toString('latin1');
  const end = text.indexOf('\r\n\r\n');
  const lines = text.slice(0, end).split('\r\n');
  const out: string[] = [];
  let inTo = false;
  for (const line of lines) {
    if (inTo && (line.startsWith(' ') || line.startsWith('\t'))) continue;
    inTo = line.toLowerCase().startsWith('to:');
    out.push(inTo ? 'To: redacted' : line);
  }
  return `${out.join('\r\n')}${text.slice(end)}`;
}

/** Builds the report of `fixture` about `rcpt` around a captured message and sends it over SMTP to `reportTo`, twice. */
async function complain(
  fixture: string,
  got: Received,
  reportTo: string,
  opts: { rcpt?: string; original?: string } = {},
) {
  const raw = fill(fixture, {
    REPORT_TO: reportTo,
    RCPT: opts.rcpt ?? got.to[0]!,
    RETURN_PATH: got.from,
    DOMAIN: FROM_DOMAIN,
    SUBJECT: headerOf(got, 'Subject') ?? '',
    DATE: new Date().toUTCString().replace('GMT', '+0000'),
    ORIGINAL: opts.original ?? got.raw.toString('latin1'),
    ORIGINAL_HEADERS: head(got),
  });
  const smtp = nodemailer.createTransport({
    host: '127.0.0.1',
    port: env.stack.service.smtpPort!,
    secure: false,
    ignoreTLS: true,
  });
  try {
    // The ingress applies a report before its 250: once sendMail returns, the report has been applied.
    for (let i = 0; i < 2; i++) await smtp.sendMail({ envelope: { from: '', to: [reportTo] }, raw });
  } finally {
    smtp.close();
  }
}

const complaintSchema = async () => {
  const res = await fetch(`${env.stack.baseUrl}/v1/schemas/webhook-email-complained.json`);
  expect(res.status).toBe(200);
  const { $id: _id, $schema: _s, ...published } = (await res.json()) as Record<string, unknown>;
  return new Ajv({ strict: false }).compile(published);
};

/** Suppressed for `complaint`, one email.complained (twice reported), one signed webhook valid against /v1/schemas. */
async function expectComplaint(id: string, rcpt: string, complaint: { feedbackType: string; userAgent: string }) {
  const sups = (await api('GET', '/api/contacts/suppressions')).filter((s: any) => s.email === rcpt);
  expect(sups).toEqual([expect.objectContaining({ reason: 'complaint', messageId: id })]);
  const events = (await api('GET', `/api/events?messageId=${id}`)).filter((e: any) => e.type === 'email.complained');
  expect(events).toEqual([expect.objectContaining({ recipient: rcpt, data: { complaint } })]);
  const hits = await eventually(async () => {
    const mine = hooks
      .hitsOn('/tracking')
      .filter((h) => h.json?.type === 'email.complained' && h.json.data?.messageId === id);
    return mine.length > 0 ? mine : undefined;
  });
  expect(hits).toHaveLength(1);
  expect(hits[0]!.verified).toBe(true);
  expect(hits[0]!.json).toMatchObject({ id: events[0].id, data: { messageId: id, complaint } });
  const validate = await complaintSchema();
  expect(validate(hits[0]!.json), JSON.stringify(validate.errors)).toBe(true);
  // The next send to the address is refused.
  expect((await env.send({ to: rcpt })).body.code).toBe('recipient_suppressed');
}

describe('feedback-loop reports over SMTP', () => {
  it('Yahoo CFL about a broadcast copy, sent to the FBL address, recipient redacted', async () => {
    const got = await broadcastCopy('yahoo');
    const id = idOf(got);
    await eventually(async () => (await api('GET', `/api/messages/${id}`)).message?.status === 'sent');
    const original = redactTo(got.raw);
    expect(original.split('\r\n\r\n')[0]).not.toContain(got.to[0]);
    expect(original).toContain('DKIM-Signature:');
    await complain('yahoo-cfl.eml', got, `fbl@bounces.${FROM_DOMAIN}`, { original });
    await expectComplaint(id, got.to[0]!, { feedbackType: 'abuse', userAgent: 'Yahoo!-Mail-Feedback/2.0' });
  });

  it('Microsoft JMRP (Outlook.com): no Original-Rcpt-To, the complainer read from the returned To of a two-recipient message', async () => {
    const got = await sendCaptured('jmrp@rcpt.test', { cc: 'jmrp-cc@rcpt.test' });
    await complain('microsoft-jmrp.eml', got, got.from, { rcpt: 'jmrp@rcpt.test' });
    await expectComplaint(idOf(got), 'jmrp@rcpt.test', { feedbackType: 'abuse', userAgent: 'Microsoft JMRP' });
    expect((await api('GET', '/api/contacts/suppressions')).some((s: any) => s.email === 'jmrp-cc@rcpt.test')).toBe(
      false,
    );
  });

  it('AOL/Verizon style with Original-Rcpt-To, on a message to two recipients: only the complainer is suppressed', async () => {
    const got = await sendCaptured('aol@rcpt.test', { cc: 'aol-cc@rcpt.test' });
    await complain('aol-verizon.eml', got, got.from, { rcpt: 'aol@rcpt.test' });
    await expectComplaint(idOf(got), 'aol@rcpt.test', { feedbackType: 'abuse', userAgent: 'AOL SComp' });
    const sups = await api('GET', '/api/contacts/suppressions');
    expect(sups.some((s: any) => s.email === 'aol-cc@rcpt.test')).toBe(false);
  });

  it('RFC 6650 (Comcast style) with only the returned headers', async () => {
    const got = await sendCaptured('comcast@rcpt.test');
    await complain('comcast-rfc6650.eml', got, got.from);
    await expectComplaint(idOf(got), 'comcast@rcpt.test', { feedbackType: 'abuse', userAgent: 'ReturnPathFBL/2.0' });
  });

  it('a not-spam report suppresses nothing and records no event', async () => {
    const got = await sendCaptured('happy@rcpt.test');
    await complain('not-spam.eml', got, got.from);
    const id = idOf(got);
    expect((await api('GET', '/api/contacts/suppressions')).some((s: any) => s.email === 'happy@rcpt.test')).toBe(
      false,
    );
    expect((await api('GET', `/api/events?messageId=${id}`)).some((e: any) => e.type === 'email.complained')).toBe(
      false,
    );
    expect((await env.send({ to: 'happy@rcpt.test' })).status).toBe(200);
  });

  it('activity_counters holds one complaint per distinct complaint on the domain', async () => {
    const c = schema.activityCounters;
    const [row] = await env.stack.service.core.db
      .select({ n: sum(c.count) })
      .from(c)
      .where(and(eq(c.domainId, domainId), eq(c.metric, 'complained')));
    expect(Number(row?.n)).toBe(4);
    expect(hooks.schemaErrors).toEqual([]);
  });
});
