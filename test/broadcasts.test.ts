import { Client, Connection } from '@temporalio/client';
import { and, desc, eq } from 'drizzle-orm';
import { dkimVerify } from 'mailauth/lib/dkim/verify.js';
import { simpleParser } from 'mailparser';
import nodemailer from 'nodemailer';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { schema } from '../db/index.js';
import { startWorker } from '../worker.js';
import { broadcastHelpers, headerOf } from './helpers/broadcasts.js';
import { resolverFor } from './helpers/dns.js';
import { startSendingStack, type SendingStack } from './helpers/sending.js';
import { eventually } from './helpers/stack.js';
import { runsOfMessage } from './helpers/visibility.js';

let env: SendingStack;
let h: ReturnType<typeof broadcastHelpers>;
beforeAll(async () => {
  // Small batches, two in flight, 100 recipients/s per domain and 3 batches per run: a few hundred
  // recipients take seconds, cross several continue-as-new boundaries and leave room to act mid-send.
  env = await startSendingStack({
    env: {
      BROADCAST_BATCH_SIZE: '20',
      BROADCAST_CONCURRENCY: '2',
      BROADCAST_DOMAIN_RATE: '100',
      BROADCAST_BATCHES_PER_RUN: '3',
      BROADCAST_FOOTER_ADDRESS: '1 Main St, Springfield',
      // Room for every recipient of this suite: the caps of broadcasts are test/send-gate.test.ts's.
      PLANS: JSON.stringify({ free: { includedEmails: 100_000, dailySendCap: 10_000, overage: 'block', paid: false } }),
    },
  });
  h = broadcastHelpers(env);
});
afterAll(async () => {
  await env?.stop();
});

const ledger = (id: string) =>
  env.stack.service.core.db
    .select()
    .from(schema.broadcastRecipients)
    .where(eq(schema.broadcastRecipients.broadcastId, id));

describe('broadcast fan-out', () => {
  it('reaches every contact of a list exactly once across a worker restart, and skips a suppressed address', async () => {
    const { list, emails } = await h.listOf('r', 300);
    await h.api('POST', '/api/contacts/suppressions', { email: emails[7] });
    const b = await h.draft({ name: 'Restart', audience: { type: 'list', id: list.id } });
    expect(b).toMatchObject({ status: 'draft', footer_address: '1 Main St, Springfield', audience_count: null });
    expect(JSON.parse(b.audience)).toEqual({ type: 'list', id: list.id });
    const sent = await h.api('POST', `/api/broadcasts/${b.id}/send`, {});
    expect(sent).toMatchObject({ status: 202, body: { id: b.id, status: 'sending', audienceCount: 300 } });
    expect(sent.body.scheduledAt).toBeUndefined();

    await eventually(async () => h.copies('r').size >= 40, 30_000, 20);
    const live = (await h.api('GET', `/api/broadcasts/${b.id}`)).body;
    expect(live).toMatchObject({ status: 'sending', progress: { live: true } });
    expect(live.progress.remaining).toBeGreaterThan(0);

    const service = env.stack.service;
    await service.worker!.shutdown();
    const atStop = h.copies('r').size;
    expect(atStop).toBeLessThan(299);
    await new Promise((r) => setTimeout(r, 1000));
    expect(h.copies('r').size).toBe(atStop); // nothing moves without a worker
    service.worker = await startWorker({
      core: service.core,
      address: service.temporalAddress,
      workflowBundle: { codePath: inject('workflowBundlePath') },
    });

    const done = await h.finished(b.id);
    expect(done).toMatchObject({
      status: 'sent',
      audience_count: 300,
      sent_count: 299,
      fail_count: 0,
      skip_count: 1,
      progress: { live: false },
    });
    expect(done.sent_at).toBeGreaterThan(0);
    const copies = h.copies('r');
    expect(copies.size).toBe(299);
    expect([...copies.values()].every((n) => n === 1)).toBe(true);
    expect(copies.has(emails[7]!)).toBe(false);
    const rows = await ledger(b.id);
    expect(rows.filter((r) => r.status === 'skipped').map((r) => [r.email, r.skipReason])).toEqual([
      [emails[7], 'suppressed'],
    ]);
    expect(new Set(rows.map((r) => r.messageId).filter(Boolean)).size).toBe(299);

    // History stays bounded: the run continued as new (3 batches per run here), one workflow per batch, none per recipient.
    const client = new Client({ connection: await Connection.connect({ address: service.temporalAddress }) });
    const runs = await eventually(async () => {
      const found: string[] = [];
      for await (const w of client.workflow.list({ query: `WorkflowId = "broadcast-${b.id}"` })) found.push(w.runId);
      return found.length > 3 ? found : undefined;
    });
    expect(runs.length).toBeGreaterThan(3);
    const first = rows.filter((r) => r.messageId).sort((a, b) => a.seq - b.seq)[0]!;
    const [msg] = await service.core.db.select().from(schema.messages).where(eq(schema.messages.id, first.messageId!));
    expect(msg!.workflowId).toBe(`broadcast-${b.id}-batch-1`);
    await client.connection.close();
    // A recipient in the middle of a batch is found by its message id: the batch run carries every id it sends.
    const sentRows = rows.filter((r) => r.messageId).sort((a, b) => a.seq - b.seq);
    const middle = sentRows[30]!; // batches of 20: the 11th of the second batch
    const [mid] = await service.core.db.select().from(schema.messages).where(eq(schema.messages.id, middle.messageId!));
    expect(mid!.workflowId).not.toBe(`broadcast-${b.id}-batch-${middle.seq}`);
    const found = await runsOfMessage(service.temporalAddress, middle.messageId!, mid!.workflowId!);
    expect([...found.keys()]).toEqual([mid!.workflowId]);
    expect(found.get(mid!.workflowId!)).toContain(middle.messageId);
    expect(found.get(mid!.workflowId!)!.length).toBeGreaterThan(10);
  });

  it('an unsubscribe between batches takes effect in the same broadcast', async () => {
    const { list } = await h.listOf('u', 200);
    const b = await h.draft({ audience: { type: 'list', id: list.id } });
    const started = Date.now();
    await h.api('POST', `/api/broadcasts/${b.id}/send`, {});
    await eventually(async () => h.copies('u').size >= 1, 30_000, 20);
    const [last] = await env.stack.service.core.db
      .select()
      .from(schema.broadcastRecipients)
      .where(eq(schema.broadcastRecipients.broadcastId, b.id))
      .orderBy(desc(schema.broadcastRecipients.seq))
      .limit(1);
    const token = env.stack.service.core.unsubscribe.token(last!.contactId);
    const res = await fetch(`${env.stack.baseUrl}/unsubscribe/${token}`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'List-Unsubscribe=One-Click',
      redirect: 'manual',
    });
    expect(res.status).toBe(200);
    const done = await h.finished(b.id);
    expect(done).toMatchObject({ status: 'sent', sent_count: 199, skip_count: 1 });
    // BROADCAST_DOMAIN_RATE=100: ten batches of 20 for one domain start 0.2 s apart.
    expect(done.sent_at - started).toBeGreaterThanOrEqual(1700);
    expect(h.copies('u').has(last!.email)).toBe(false);
    const [row] = await env.stack.service.core.db
      .select()
      .from(schema.broadcastRecipients)
      .where(and(eq(schema.broadcastRecipients.broadcastId, b.id), eq(schema.broadcastRecipients.seq, last!.seq)));
    expect(row).toMatchObject({ status: 'skipped', skipReason: 'unsubscribed' });
  });

  it('a filter audience reaches exactly its contacts, with merge tags, preview and the CAN-SPAM footer', async () => {
    const mk = (email: string, name: string, attributes: Record<string, unknown>) =>
      h.api('POST', '/api/contacts', { email, name, attributes });
    await mk('f-pro1@rcpt.test', 'Ada Lovelace', { plan: 'pro', seats: 12 });
    await mk('f-pro2@rcpt.test', 'Alan Turing', { plan: 'pro', seats: 2 });
    await mk('f-free@rcpt.test', 'Grace Hopper', { plan: 'free', seats: 50 });
    const b = await h.draft({
      subject: 'Hello {{first_name}}',
      preview: 'Big news inside',
      html: '<html><body><p>Dear {{name}}, your plan is {{plan}}.</p></body></html>',
      text: 'Dear {{name}} ({{seats}} seats)',
      audience: {
        type: 'filter',
        query: 'attributes.plan = "pro" and (attributes.seats >= 10 or email contains "pro2")',
      },
      footerAddress: '42 Harbour Rd, Portsmouth',
    });
    expect((await h.api('POST', `/api/broadcasts/${b.id}/send`, {})).body.audienceCount).toBe(2);
    await h.finished(b.id);
    expect([...h.copies('f').keys()].sort()).toEqual(['f-pro1@rcpt.test', 'f-pro2@rcpt.test']);
    const mail = await simpleParser(env.sink.received.find((r) => r.to.includes('f-pro1@rcpt.test'))!.raw);
    expect(mail.subject).toBe('Hello Ada');
    expect(mail.headers.get('to')).toMatchObject({ value: [{ name: 'Ada Lovelace', address: 'f-pro1@rcpt.test' }] });
    expect(mail.html).toContain(
      '<div style="display:none;max-height:0;overflow:hidden">Big news inside</div><p>Dear Ada Lovelace, your plan is pro.</p>',
    );
    expect(mail.html).toMatch(
      /42 Harbour Rd, Portsmouth<br><a href="http:\/\/[^"]+\/unsubscribe\/[a-z2-7]{45}">Unsubscribe<\/a>/,
    );
    expect(mail.text).toMatch(
      /^Dear Ada Lovelace \(12 seats\)\n\n--\n42 Harbour Rd, Portsmouth\nUnsubscribe: http:\/\/\S+\/unsubscribe\/[a-z2-7]{45}\n$/,
    );
  });

  it('a bad filter is a clear 400', async () => {
    const res = await h.api('POST', '/api/broadcasts', {
      from: `news@acme.send.svc.test`,
      audience: { type: 'filter', query: 'attributes.plan = pro and' },
    });
    expect(res).toMatchObject({ status: 400, body: { code: 'invalid_filter' } });
    expect(res.body.error).toMatch(/quote strings/);
  });
});

describe('broadcast states', () => {
  it('canceling while sending stops before the next batch and ends canceled', async () => {
    const { list } = await h.listOf('x', 200);
    const b = await h.draft({ audience: { type: 'list', id: list.id } });
    await h.api('POST', `/api/broadcasts/${b.id}/send`, {});
    await eventually(async () => h.copies('x').size >= 1, 30_000, 20);
    const res = await h.api('POST', `/api/broadcasts/${b.id}/cancel`);
    expect(res).toMatchObject({ status: 200, body: { status: 'canceled' } });
    const reached = h.copies('x').size;
    expect(reached).toBeLessThan(200);
    expect(res.body.sent_count).toBe(reached);
    expect([...h.copies('x').values()].every((n) => n === 1)).toBe(true);
  });

  it('only drafts can be edited, deleted or sent', async () => {
    const { list } = await h.listOf('d', 2);
    const b = await h.draft({ audience: { type: 'list', id: list.id } });
    expect((await h.api('PATCH', `/api/broadcasts/${b.id}`, { subject: 'Changed' })).body.subject).toBe('Changed');
    expect((await h.api('POST', `/api/broadcasts/${b.id}/cancel`)).body.code).toBe('not_cancelable');
    await h.api('POST', `/api/broadcasts/${b.id}/send`, {});
    for (const [method, path, body] of [
      ['PATCH', '', { subject: 'x' }],
      ['DELETE', '', undefined],
      ['POST', '/send', {}],
    ] as const) {
      const res = await h.api(method, `/api/broadcasts/${b.id}${path}`, body);
      expect(res.status).toBe(409);
      expect(res.body).toEqual({ error: expect.stringMatching(/draft/), code: 'not_draft' });
    }
    await h.finished(b.id);
    expect((await h.api('DELETE', `/api/broadcasts/${b.id}`)).body.code).toBe('not_draft');
    const other = await h.draft({ audience: { type: 'list', id: list.id } });
    expect((await h.api('DELETE', `/api/broadcasts/${other.id}`)).body).toEqual({ ok: true });
    expect((await h.api('GET', `/api/broadcasts/${other.id}`)).status).toBe(404);
  });

  it("the account footer address prefills new drafts, is the account's own, and clears back to the operator default", async () => {
    expect((await h.api('GET', '/api/account/settings')).body).toEqual({ footerAddress: null });
    expect((await h.api('PATCH', '/api/account/settings', { footerAddress: '  7 Quay St, Bristol ' })).body).toEqual({
      footerAddress: '7 Quay St, Bristol',
    });
    expect((await h.api('GET', '/api/account/settings')).body).toEqual({ footerAddress: '7 Quay St, Bristol' });
    const { list } = await h.listOf('f', 1);
    expect((await h.draft({ audience: { type: 'list', id: list.id } })).footer_address).toBe('7 Quay St, Bristol');
    expect(
      (await h.draft({ audience: { type: 'list', id: list.id }, footerAddress: 'Given Rd 1' })).footer_address,
    ).toBe('Given Rd 1');

    const other = (
      await env.stack.api('POST', '/api/auth/signup', {
        body: { email: 'footer-other@example.com', password: 'other password' },
      })
    ).body;
    expect((await env.stack.api('GET', '/api/account/settings', { token: other.token })).body).toEqual({
      footerAddress: null,
    });
    const bad = await h.api('PATCH', '/api/account/settings', { footerAddress: 'x'.repeat(501) });
    expect(bad.status).toBe(400);
    expect((await h.api('PATCH', '/api/account/settings', { footer: 'x' })).status).toBe(400);

    expect((await h.api('PATCH', '/api/account/settings', { footerAddress: null })).body).toEqual({
      footerAddress: null,
    });
    expect((await h.draft({ audience: { type: 'list', id: list.id } })).footer_address).toBe('1 Main St, Springfield');
  });

  it('a scheduled broadcast starts on time', async () => {
    const { list } = await h.listOf('s', 3);
    const b = await h.draft({ audience: { type: 'list', id: list.id } });
    const at = Date.now() + 2500;
    const res = await h.api('POST', `/api/broadcasts/${b.id}/send`, { scheduledAt: new Date(at).toISOString() });
    expect(res).toMatchObject({
      status: 202,
      body: { id: b.id, status: 'scheduled', scheduledAt: at, audienceCount: 3 },
    });
    expect((await h.api('GET', `/api/broadcasts/${b.id}`)).body).toMatchObject({
      status: 'scheduled',
      scheduled_at: at,
      audience_count: 3,
    });
    await env.sink.waitFor((r) => r.to.includes('s-0@rcpt.test'));
    expect(Date.now()).toBeGreaterThanOrEqual(at);
    expect(Date.now() - at).toBeLessThan(4000);
    expect((await h.finished(b.id)).sent_count).toBe(3);
  });

  it('a failure retrying cannot fix ends the broadcast failed, not stuck sending', async () => {
    const { list } = await h.listOf('t', 2);
    const tpl = (
      await h.api('POST', '/api/templates', { name: 'gone soon', subject: 'From a template', text: 'Hi {{email}}' })
    ).body;
    const b = await h.draft({
      subject: '',
      html: undefined,
      text: undefined,
      templateId: tpl.id,
      audience: { type: 'list', id: list.id },
    });
    await h.api('POST', `/api/broadcasts/${b.id}/send`, { scheduledAt: Date.now() + 1500 });
    expect((await h.api('DELETE', `/api/templates/${tpl.id}`)).body).toEqual({ ok: true });
    expect(await h.finished(b.id)).toMatchObject({ status: 'failed', sent_count: 0 });
    expect(h.copies('t').size).toBe(0);
  });

  it('a scheduled broadcast canceled before its time sends nothing', async () => {
    const { list } = await h.listOf('c', 3);
    const b = await h.draft({ audience: { type: 'list', id: list.id } });
    await h.api('POST', `/api/broadcasts/${b.id}/send`, { scheduledAt: Date.now() + 1500 });
    const canceled = await h.api('POST', `/api/broadcasts/${b.id}/cancel`);
    expect(canceled).toMatchObject({ status: 200, body: { id: b.id, status: 'canceled' } });
    await new Promise((r) => setTimeout(r, 3000));
    expect(h.copies('c').size).toBe(0);
    expect((await h.api('GET', `/api/broadcasts/${b.id}`)).body).toMatchObject({ status: 'canceled', sent_count: 0 });
    expect((await h.api('POST', `/api/broadcasts/${b.id}/cancel`)).body.code).toBe('not_cancelable');
  });
});

describe('unsubscribe', () => {
  it('carries List-Unsubscribe (https + mailto) and One-Click, DKIM-signed; GET confirms, the RFC 8058 POST and the mailto unsubscribe', async () => {
    const { list } = await h.listOf('o', 2);
    const b = await h.draft({ audience: { type: 'list', id: list.id } });
    await h.api('POST', `/api/broadcasts/${b.id}/send`, {});
    await h.finished(b.id);
    const [first, second] = ['o-0@rcpt.test', 'o-1@rcpt.test'].map((a) =>
      env.sink.received.find((r) => r.to.includes(a))!,
    );
    const header = headerOf(first!, 'List-Unsubscribe')!;
    const [, url, mailto] = /^<(https?:\/\/[^>]+)>, <mailto:([^>]+)>$/.exec(header)!;
    expect(url).toMatch(new RegExp(`^${env.stack.config.publicUrl}/unsubscribe/[a-z2-7]{45}$`));
    expect(mailto).toMatch(/^unsubscribe\+[a-z2-7]{45}@bounces\.acme\.send\.svc\.test$/);
    expect(mailto!.split('@')[0]!.length).toBeLessThanOrEqual(64);
    expect(headerOf(first!, 'List-Unsubscribe-Post')).toBe('List-Unsubscribe=One-Click');

    // DKIM: the signature verifies and covers List-Unsubscribe and List-Unsubscribe-Post.
    const r = resolverFor(`127.0.0.1:${env.dnsPort}`);
    const verdict = await dkimVerify(first!.raw, {
      resolver: ((name: string, rr: string) => r.resolve(name, rr)) as never,
    });
    expect(verdict.results[0]).toMatchObject({ status: { result: 'pass' } });
    const signed = /\bh=([^;]+)/
      .exec(headerOf(first!, 'DKIM-Signature')!)![1]!
      .toLowerCase()
      .split(':')
      .map((s) => s.trim());
    expect(signed).toContain('list-unsubscribe');
    expect(signed).toContain('list-unsubscribe-post');

    const contactOf = async (email: string) =>
      (await h.api('GET', `/api/contacts?search=${encodeURIComponent(email)}`)).body[0];
    const page = await fetch(url!);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('<form method="post">');
    expect((await contactOf('o-0@rcpt.test')).subscribed).toBe(true); // a GET (a link scanner) changes nothing

    const click = await fetch(url!, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'List-Unsubscribe=One-Click',
      redirect: 'manual',
    });
    expect(click.status).toBe(200);
    expect(click.headers.get('set-cookie')).toBeNull();
    expect(click.headers.get('location')).toBeNull();
    expect(await contactOf('o-0@rcpt.test')).toMatchObject({ subscribed: false, unsubscribed_at: expect.any(Number) });
    // Tampered a few characters from the end: the last base64url character carries unused bits, so changing it can decode to the same bytes.
    const tampered = `${url!.slice(0, -5)}${url!.at(-5) === 'a' ? 'b' : 'a'}${url!.slice(-4)}`;
    expect((await fetch(tampered, { method: 'POST', body: 'List-Unsubscribe=One-Click' })).status).toBe(404);

    const other = /<mailto:([^>]+)>/.exec(headerOf(second!, 'List-Unsubscribe')!)![1]!;
    const smtp = nodemailer.createTransport({
      host: '127.0.0.1',
      port: env.stack.service.smtpPort!,
      secure: false,
      ignoreTLS: true,
    });
    await smtp.sendMail({ from: 'o-1@rcpt.test', to: other, subject: 'unsubscribe', text: 'unsubscribe' });
    expect(await contactOf('o-1@rcpt.test')).toMatchObject({ subscribed: false });
  });
});
