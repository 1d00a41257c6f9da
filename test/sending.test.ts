import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { eq } from 'drizzle-orm';
import { simpleParser } from 'mailparser';
import { dkimVerify } from 'mailauth/lib/dkim/verify.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schema } from '../db/index.js';
import { resolverFor } from './helpers/dns.js';
import { FROM_DOMAIN, SERVICE, startSendingStack, type SendingStack } from './helpers/sending.js';
import { eventually, type TestStack } from './helpers/stack.js';
import { runsOfMessage } from './helpers/visibility.js';

let env: SendingStack;
let stack: TestStack;
let sink: SendingStack['sink'];
let key: string;
let dnsPort: number;
let flaky = 0;
let fileServer: ReturnType<typeof createServer>;

beforeAll(async () => {
  env = await startSendingStack({
    onRcpt: (addr) => {
      if (addr.startsWith('gone')) return { code: 550, message: '5.1.1 No such user' };
      if (addr.startsWith('flaky') && flaky++ < 1) return { code: 451, message: '4.3.0 Try again later' };
      return undefined;
    },
    env: {
      PLANS: JSON.stringify({
        free: { includedEmails: 1000, dailySendCap: 1000, overage: 'block', paid: false },
        tiny: { includedEmails: 1000, dailySendCap: 2, overage: 'block', paid: false },
      }),
    },
  });
  ({ stack, sink, key, dnsPort } = env);
  fileServer = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/csv' }).end('a,b\n1,2\n'));
  await new Promise<void>((r) => fileServer.listen(0, '127.0.0.1', r));
});
afterAll(async () => {
  await env?.stop();
  fileServer?.close();
});

const send = (body: Record<string, unknown>, token = key) => env.send(body, token);
const messageRow = async (id: string) =>
  (await stack.service.core.db.select().from(schema.messages).where(eq(schema.messages.id, id)))[0]!;
const to = (addr: string) => (r: { to: string[] }) => r.to.includes(addr);

describe('POST /v1/send', () => {
  it('delivers to the recipient MX a signed message with headers, body and attachments', async () => {
    const fileUrl = `http://127.0.0.1:${(fileServer.address() as AddressInfo).port}/report.csv`;
    const res = await send({
      to: 'Bob <bob@rcpt.test>',
      cc: 'carol@rcpt.test',
      subject: 'Quarterly report',
      text: 'See attached.',
      html: '<p>See <b>attached</b>.</p>',
      inReplyTo: '<thread-1@example.com>',
      headers: { 'X-Campaign': 'q3', References: '<root@example.com> <thread-1@example.com>' },
      metadata: { customer: 'c_42', tier: 3 },
      attachments: [
        { filename: 'hello.txt', content: Buffer.from('hello file').toString('base64'), contentType: 'text/plain' },
        { filename: 'report.csv', url: fileUrl },
      ],
    });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ id: expect.stringMatching(/^msg_/), status: 'queued' });
    const got = await sink.waitFor(to('bob@rcpt.test'));
    expect(got.to.sort()).toEqual(['bob@rcpt.test', 'carol@rcpt.test']);
    expect(got.from).toBe(`bounce+${res.body.id}@bounces.${FROM_DOMAIN}`);
    const mail = await simpleParser(got.raw);
    expect(mail.subject).toBe('Quarterly report');
    expect(mail.from?.text).toBe(`"Acme" <hello@${FROM_DOMAIN}>`);
    expect(mail.inReplyTo).toBe('<thread-1@example.com>');
    expect(mail.headers.get('references')).toEqual(['<root@example.com>', '<thread-1@example.com>']);
    expect(mail.headers.get('x-campaign')).toBe('q3');
    expect(mail.headers.has('x-customer')).toBe(false);
    expect(mail.text?.trim()).toBe('See attached.');
    expect(mail.html).toContain('<b>attached</b>');
    expect(mail.attachments.map((a) => [a.filename, a.content.toString()])).toEqual([
      ['hello.txt', 'hello file'],
      ['report.csv', 'a,b\n1,2\n'],
    ]);

    const r = resolverFor(`127.0.0.1:${dnsPort}`);
    const verdict = await dkimVerify(got.raw, {
      resolver: ((name: string, rr: string) => r.resolve(name, rr)) as never,
    });
    expect(verdict.results[0]).toMatchObject({
      status: { result: 'pass' },
      signingDomain: FROM_DOMAIN,
      selector: 'svc1',
    });

    const row = await eventually(async () => {
      const m = await messageRow(res.body.id);
      return m.status === 'sent' ? m : undefined;
    });
    expect(row.workflowId).toMatch(/^outbound-msg_/); // named after the first message of its batch
    const detail = (await stack.api('GET', `/api/messages/${res.body.id}`, { token: key })).body;
    expect(detail.message).toMatchObject({
      status: 'sent',
      metadata: { customer: 'c_42', tier: 3 },
      workflow_id: row.workflowId,
    });
    expect(detail.attachments).toHaveLength(2);
    expect(detail.events.map((e: any) => e.type)).toContain('email.sent');
  });

  it('enforces its gates with clear errors', async () => {
    expect((await send({ to: 'x@rcpt.test', from: 'me@unverified.example' })).body.code).toBe('domain_not_verified');
    expect((await send({ to: 'x@rcpt.test', bogus: true })).status).toBe(400);
    expect((await send({ to: 'not an address' })).body.code).toBe('invalid_address');
    expect((await send({ to: 'x@rcpt.test', subject: undefined })).body.code).toBe('subject_required');
    expect((await send({ to: 'x@rcpt.test', text: undefined })).body.code).toBe('content_required');
    expect((await send({ to: 'x@rcpt.test', headers: { 'X-Evil': 'a\r\nBcc: victim@example.com' } })).body.code).toBe(
      'invalid_header',
    );
    expect((await send({ to: 'x@rcpt.test', scheduledAt: '1750000000' })).body.code).toBe('bad_schedule');
    expect((await send({ to: 'x@rcpt.test', sequence: 'onboarding' })).body.code).toBe('sequence_not_found');
    const many = Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`k${i}`, i]));
    expect((await send({ to: 'x@rcpt.test', metadata: many })).status).toBe(400);
    expect((await send({ to: 'x@rcpt.test', metadata: { ['k'.repeat(65)]: 1 } })).status).toBe(400);
    expect((await send({ to: 'x@rcpt.test', metadata: { k: 'v'.repeat(513) } })).status).toBe(400);
    expect((await send({ to: 'x@rcpt.test', metadata: { k: { nested: 1 } } })).status).toBe(400);
  });

  it('a domain-scoped key sends only from its own domain', async () => {
    const session = (
      await stack.api('POST', '/api/auth/login', { body: { email: 'sender@example.com', password: 'sender password' } })
    ).body.token;
    const other = (await stack.api('POST', '/api/domains/subdomain', { token: session, body: { subdomain: 'other' } }))
      .body.domain;
    const acme = (await stack.api('GET', '/api/domains', { token: session })).body.find(
      (d: any) => d.domain === FROM_DOMAIN,
    );
    const scoped = (await stack.api('POST', '/api/keys/scoped', { token: session, body: { domainId: acme.id } })).body
      .key;
    expect((await send({ to: 'scoped@rcpt.test' }, scoped)).status).toBe(200);
    expect(await send({ to: 'scoped@rcpt.test', from: `x@${other.domain}` }, scoped)).toMatchObject({
      status: 403,
      body: { code: 'domain_not_verified' },
    });
    expect((await send({ to: 'scoped@rcpt.test', from: `x@${other.domain}` })).status).toBe(200);
  });

  it('blocks sending until the account email is verified', async () => {
    const s = (
      await stack.api('POST', '/api/auth/signup', {
        body: { email: 'unverified@example.com', password: 'unverified pw' },
      })
    ).body.token;
    const k = (await stack.api('GET', '/api/keys', { token: s })).body.key;
    expect(await send({ to: 'x@rcpt.test' }, k)).toMatchObject({ status: 403, body: { code: 'email_not_verified' } });
  });

  it('a 4xx from the MX is retried and later delivered', async () => {
    const res = await send({ to: 'flaky@rcpt.test', subject: 'retry me' });
    await sink.waitFor(to('flaky@rcpt.test'));
    const row = await eventually(async () => {
      const m = await messageRow(res.body.id);
      return m.status === 'sent' ? m : undefined;
    });
    expect(row.attempts).toBe(2);
    const events = (await stack.api('GET', `/api/events?messageId=${res.body.id}`, { token: key })).body.map(
      (e: any) => e.type,
    );
    expect(events).toEqual(expect.arrayContaining(['email.deferred', 'email.sent']));
  });

  it('a 5xx becomes a hard bounce, an email.bounced event and a suppression that blocks the next send', async () => {
    const res = await send({ to: 'gone@rcpt.test' });
    const row = await eventually(async () => {
      const m = await messageRow(res.body.id);
      return m.status === 'bounced' ? m : undefined;
    });
    expect(row.bounceType).toBe('hard');
    const events = (await stack.api('GET', `/api/events?messageId=${res.body.id}`, { token: key })).body;
    expect(events.find((e: any) => e.type === 'email.bounced')).toMatchObject({
      recipient: 'gone@rcpt.test',
      data: { bounce: { type: 'hard' } },
    });
    const sup = (await stack.api('GET', '/api/contacts/suppressions', { token: key })).body;
    expect(sup.find((s: any) => s.email === 'gone@rcpt.test')).toMatchObject({
      reason: 'hard_bounce',
      messageId: res.body.id,
    });
    expect(await send({ to: 'gone@rcpt.test' })).toMatchObject({ status: 422, body: { code: 'recipient_suppressed' } });
    expect((await stack.api('DELETE', '/api/contacts/suppressions/gone@rcpt.test', { token: key })).body).toEqual({
      ok: true,
    });
    expect(
      (await stack.api('POST', '/api/contacts/suppressions', { token: key, body: { email: 'manual@rcpt.test' } }))
        .status,
    ).toBe(201);
    expect((await send({ to: 'manual@rcpt.test' })).body.code).toBe('recipient_suppressed');
  });
});

describe('POST /v1/send/batch', () => {
  it('sends one message per recipient with merged data, reporting partial failures in order', async () => {
    await stack.api('POST', '/api/contacts/suppressions', { token: key, body: { email: 'blocked@rcpt.test' } });
    const res = await stack.api('POST', '/v1/send/batch', {
      token: key,
      body: {
        from: `hello@${FROM_DOMAIN}`,
        subject: 'Hi {{name}}',
        html: '<p>Hello {{name}} from {{team}}</p>',
        text: 'Hello {{name}}',
        templateData: { team: 'Acme', name: 'friend' },
        headers: { 'X-Batch': 'b1' },
        recipients: [
          { to: 'ann@rcpt.test', templateData: { name: '<Ann & co>' } },
          { to: 'blocked@rcpt.test' },
          { to: 'nope' },
          { to: 'Ben <ben@rcpt.test>', headers: { 'X-Batch': 'b2' } },
        ],
      },
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ sent: 2, scheduled: 0, failed: 2 });
    expect(res.body.results.map((r: any) => [r.to, r.status, r.code])).toEqual([
      ['ann@rcpt.test', 'sent', undefined],
      ['blocked@rcpt.test', 'failed', 'recipient_suppressed'],
      ['nope', 'failed', 'invalid_address'],
      ['Ben <ben@rcpt.test>', 'sent', undefined],
    ]);
    const ann = await simpleParser((await sink.waitFor(to('ann@rcpt.test'))).raw);
    expect(ann.subject).toBe('Hi <Ann & co>');
    expect(ann.html).toContain('Hello &lt;Ann &amp; co&gt; from Acme');
    expect(ann.text?.trim()).toBe('Hello <Ann & co>');
    expect(ann.to && 'text' in ann.to ? ann.to.text : '').toBe('ann@rcpt.test');
    const ben = await sink.waitFor(to('ben@rcpt.test'));
    expect(ben.to).toEqual(['ben@rcpt.test']);
    expect((await simpleParser(ben.raw)).headers.get('x-batch')).toBe('b2');
  });

  it('a full flush (100 messages of one account) starts as one run, not through the sweep', async () => {
    const batch = (tag: string) =>
      stack.api('POST', '/v1/send/batch', {
        token: key,
        body: {
          from: `hello@${FROM_DOMAIN}`,
          subject: 'full flush',
          text: 'x',
          recipients: Array.from({ length: 50 }, (_, i) => ({ to: `full-${tag}-${i}@rcpt.test` })),
        },
      });
    const [a, b] = await Promise.all([batch('a'), batch('b')]);
    const ids = [...a.body.results, ...b.body.results].map((r: any) => r.id as string);
    expect(ids).toHaveLength(100);
    const rows = await eventually(
      async () => {
        const r = await Promise.all(ids.map(messageRow));
        return r.every((m) => m.status === 'sent') ? r : undefined;
      },
      30_000,
      250,
    );
    expect(rows.every((m) => m.workflowId?.startsWith('outbound-') && !m.workflowId.endsWith('-sweep'))).toBe(true);

    // A message in the middle of the largest run is found by its id: SvcMessageId holds every id of the run.
    const byRun = new Map<string, string[]>();
    rows.forEach((m, i) => byRun.set(m.workflowId!, [...(byRun.get(m.workflowId!) ?? []), ids[i]!]));
    const [run, held] = [...byRun.entries()].sort((x, y) => y[1].length - x[1].length)[0]!;
    expect(held.length).toBeGreaterThan(2);
    // The run is named after its first message in delivery order; pick one that is not its namesake.
    const others = held.filter((id) => run !== `outbound-${id}`);
    expect(others.length).toBeGreaterThan(1);
    const middle = others[Math.floor(others.length / 2)]!;
    const found = await runsOfMessage(stack.service.temporalAddress, middle, run);
    expect([...found.keys()]).toEqual([run]);
    expect([...found.get(run)!].sort()).toEqual([...held].sort());
  });

  it('reports daily_limit per recipient once the cap is reached, and the single send answers 429', async () => {
    const s = (
      await stack.api('POST', '/api/auth/signup', { body: { email: 'tiny@example.com', password: 'tiny plan pw' } })
    ).body;
    await stack.service.core.db
      .update(schema.users)
      .set({ emailVerified: true, plan: 'tiny' })
      .where(eq(schema.users.id, s.user.id));
    await stack.api('POST', '/api/domains/subdomain', { token: s.token, body: { subdomain: 'tiny' } });
    const k = (await stack.api('GET', '/api/keys', { token: s.token })).body.key;
    const res = await stack.api('POST', '/v1/send/batch', {
      token: k,
      body: {
        from: `t@tiny.${SERVICE}`,
        subject: 's',
        text: 't',
        recipients: [{ to: 'a@rcpt.test' }, { to: 'b@rcpt.test' }, { to: 'c@rcpt.test' }],
      },
    });
    expect(res.body).toMatchObject({ sent: 2, failed: 1 });
    expect(res.body.results[2]).toMatchObject({ status: 'failed', code: 'daily_limit' });
    const single = await stack.api('POST', '/v1/send', {
      token: k,
      body: { from: `t@tiny.${SERVICE}`, to: 'd@rcpt.test', subject: 's', text: 't' },
    });
    expect(single).toMatchObject({ status: 429, body: { code: 'daily_limit' } });
    expect(Number(single.headers.get('retry-after'))).toBeGreaterThan(0);
    expect((await stack.api('GET', '/api/billing/usage', { token: s.token })).body.emails.used).toBe(2);
    expect((await stack.api('GET', '/api/domains', { token: s.token })).body[0].dailyLimitReached).toBe(true);
  });
});

describe('templates and tracking', () => {
  it('seeds from a template, lets explicit fields win, and escapes merge values in html', async () => {
    const session = (
      await stack.api('POST', '/api/auth/login', { body: { email: 'sender@example.com', password: 'sender password' } })
    ).body.token;
    const tpl = (
      await stack.api('POST', '/api/templates', {
        token: session,
        body: { name: 'welcome', subject: 'Welcome {{name}}', html: '<h1>Hi {{name}}</h1>', text: 'Hi {{name}}' },
      })
    ).body;
    const res = await send({
      to: 'tpl@rcpt.test',
      subject: undefined,
      text: undefined,
      templateId: tpl.id,
      templateData: { name: '<script>x</script>' },
    });
    expect(res.status).toBe(200);
    const mail = await simpleParser((await sink.waitFor(to('tpl@rcpt.test'))).raw);
    expect(mail.subject).toBe('Welcome <script>x</script>');
    expect(mail.html).toContain('<h1>Hi &lt;script&gt;x&lt;/script&gt;</h1>');
    const over = await send({
      to: 'tpl2@rcpt.test',
      subject: 'Explicit wins',
      text: undefined,
      templateId: tpl.id,
      templateData: { name: 'Zed' },
    });
    expect(over.status).toBe(200);
    expect((await simpleParser((await sink.waitFor(to('tpl2@rcpt.test'))).raw)).subject).toBe('Explicit wins');
    expect((await send({ to: 'x@rcpt.test', templateId: 'tpl_doesnotexist000000000' })).status).toBe(404);
  });

  it('records opens and clicks through signed links that cannot be turned into open redirects', async () => {
    const res = await send({
      to: 'track@rcpt.test',
      html: '<p><a href="https://example.org/page?a=1&amp;b=2">go</a></p>',
      trackOpens: true,
      trackClicks: true,
    });
    const mail = await simpleParser((await sink.waitFor(to('track@rcpt.test'))).raw);
    const html = mail.html as string;
    const click = /href="([^"]+\/t\/c\/[^"]+)"/.exec(html)![1]!.replace(/&amp;/g, '&');
    const pixel = /src="([^"]+\/t\/o\/[^"]+)"/.exec(html)![1]!.replace(/&amp;/g, '&');
    const path = (u: string) => u.replace(stack.config.publicUrl, '');
    const redirect = await fetch(`${stack.baseUrl}${path(click)}`, { redirect: 'manual' });
    expect(redirect.status).toBe(302);
    expect(redirect.headers.get('location')).toBe('https://example.org/page?a=1&b=2');
    const forged = path(click).replace(
      encodeURIComponent('https://example.org/page?a=1&b=2'),
      encodeURIComponent('https://evil.example/'),
    );
    expect((await fetch(`${stack.baseUrl}${forged}`, { redirect: 'manual' })).status).toBe(403);
    const gif = await fetch(`${stack.baseUrl}${path(pixel)}`);
    expect(gif.headers.get('content-type')).toBe('image/gif');
    const types = await eventually(async () => {
      const ev = (await stack.api('GET', `/api/events?messageId=${res.body.id}`, { token: key })).body.map(
        (e: any) => e.type,
      );
      return ev.includes('email.opened') && ev.includes('email.clicked') ? ev : undefined;
    });
    expect(types).toContain('email.sent');
  });
});

describe('reading what happened', () => {
  it('lists messages newest first with a before cursor and search', async () => {
    const page = (await stack.api('GET', '/api/messages?limit=2', { token: key })).body;
    expect(page).toHaveLength(2);
    expect(page[0].created_at).toBeGreaterThanOrEqual(page[1].created_at);
    const next = (await stack.api('GET', `/api/messages?limit=2&before=${page[1].created_at}`, { token: key })).body;
    expect(next[0].created_at).toBeLessThan(page[1].created_at);
    const found = (await stack.api('GET', '/api/messages?search=Quarterly', { token: key })).body;
    expect(found.map((m: any) => m.subject)).toEqual(['Quarterly report']);
    expect((await stack.api('GET', '/api/messages/msg_unknown0000000000000000', { token: key })).status).toBe(404);
  });
});
