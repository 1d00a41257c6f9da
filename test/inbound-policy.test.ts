import { createServer, type Server } from 'node:http';
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schema } from '../db/index.js';
import { connectTemporal } from '../temporal/client.js';
import { sweepHeldInboundWorkflow } from '../workflows/housekeeping.js';
import { startTestDns } from './helpers/dns.js';
import { rawSmtp } from './helpers/smtp-client.js';
import { eventually, startStack, type TestStack } from './helpers/stack.js';
import { startWebhookReceiver } from './helpers/webhook-receiver.js';

/**
 * The per-domain inbound policy (docs/inbound-policy.md): sender rules answered at SMTP, the spam thresholds
 * (refuse, hold) and the quarantine (release once, delete, the expiry sweep). The spam filter here is a
 * loopback HTTP peer speaking rspamd's `/checkv2` that scores each message by its `X-Test-Score` header, so
 * each threshold is crossed exactly (the real rspamd is exercised by the spam filter's own suite).
 */
const SERVICE = 'pol.svc.test';
const DOMAIN = `pol.${SERVICE}`;
const ZERO = `polzero.${SERVICE}`;
let stack: TestStack;
let dns: Awaited<ReturnType<typeof startTestDns>>;
let hooks: Awaited<ReturnType<typeof startWebhookReceiver>>;
let filter: Server;
let token: string;
let other: string;
let domainId: string;
let zeroId: string;

/** rspamd's `/checkv2` answer for a message whose `X-Test-Score: <n>` header says its score (0 without one). */
function startFilter(): Promise<{ server: Server; url: string }> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('latin1');
      const at = text.indexOf('X-Test-Score: ');
      const score = at < 0 ? 0 : Number(text.slice(at + 14, text.indexOf('\r\n', at)));
      res.setHeader('content-type', 'application/json');
      res.end(
        JSON.stringify({
          score,
          required_score: 15,
          action: score >= 15 ? 'reject' : score >= 6 ? 'add header' : 'no action',
          symbols: { TEST_SCORE: { name: 'TEST_SCORE', score } },
        }),
      );
    });
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      resolve({ server, url: `http://127.0.0.1:${port}` });
    }),
  );
}

beforeAll(async () => {
  dns = await startTestDns();
  hooks = await startWebhookReceiver();
  const f = await startFilter();
  filter = f.server;
  stack = await startStack({ SERVICE_DOMAIN: SERVICE, DNS_SERVERS: dns.server.address, RSPAMD_URL: f.url });
  const signup = async (email: string) =>
    (await stack.api('POST', '/api/auth/signup', { body: { email, password: 'policy password' } })).body.token;
  token = await signup('policy-owner@example.com');
  other = await signup('policy-other@example.com');
  domainId = (await stack.api('POST', '/api/domains/subdomain', { token, body: { subdomain: 'pol' } })).body.domain.id;
  zeroId = (await stack.api('POST', '/api/domains/subdomain', { token, body: { subdomain: 'polzero' } })).body.domain
    .id;
  expect((await stack.api('PATCH', `/api/domains/${zeroId}`, { token, body: { zero_retention: 1 } })).status).toBe(200);
  for (const [id, path] of [
    [domainId, '/pol'],
    [zeroId, '/zero'],
  ] as const) {
    const res = await stack.api('PUT', `/api/domains/${id}/webhook`, { token, body: { url: `${hooks.base}${path}` } });
    expect(res.status).toBe(200);
    hooks.secret(path, res.body.signingSecret);
  }
});
afterAll(async () => {
  await stack?.stop();
  await hooks?.close();
  await dns?.close();
  await new Promise((r) => filter?.close(r));
});

let seq = 0;
/** One SMTP transaction on a raw socket: each reply as it came (RCPT refused: no DATA). */
async function transact(o: { from: string; to: string; headerFrom?: string; score?: number; subject?: string }) {
  const c = await rawSmtp(stack.service.smtpPort!);
  try {
    await c.command('EHLO client.example');
    const mail = await c.command(`MAIL FROM:<${o.from}>`);
    const rcpt = await c.command(`RCPT TO:<${o.to}>`);
    if (rcpt.code !== 250) return { mail, rcpt };
    const start = await c.command('DATA');
    expect(start.code).toBe(354);
    const subject = o.subject ?? `policy ${++seq}`;
    await c.write(
      [
        `From: ${o.headerFrom ?? o.from}`,
        `To: ${o.to}`,
        `Subject: ${subject}`,
        `Message-ID: <${Date.now()}.${seq}@client.example>`,
        ...(o.score !== undefined ? [`X-Test-Score: ${o.score}`] : []),
        '',
        `Body of ${subject}`,
        '.',
        '',
      ].join('\r\n'),
    );
    const data = await c.reply();
    return { mail, rcpt, data, subject };
  } finally {
    c.close();
  }
}
const idOf = (reply: { text: string } | undefined) => reply?.text.split(' as ')[1]?.trim() ?? '';
const addRule = async (kind: string, value: string, action: string, id = domainId) => {
  const res = await stack.api('POST', `/api/domains/${id}/sender-rules`, { token, body: { kind, value, action } });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.rule.id as string;
};
const deleteRule = async (ruleId: string) =>
  expect((await stack.api('DELETE', `/api/domains/${domainId}/sender-rules/${ruleId}`, { token })).status).toBe(200);
const setPolicy = async (body: Record<string, unknown>, id = domainId) => {
  const res = await stack.api('PATCH', `/api/domains/${id}/inbound-policy`, { token, body });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.policy;
};
const messageRow = async (id: string) =>
  (await stack.service.core.db.select().from(schema.messages).where(eq(schema.messages.id, id)))[0];
const mailboxCopies = async (id: string) =>
  stack.service.core.db.select().from(schema.mailboxMessages).where(eq(schema.mailboxMessages.messageId, id));
/** The account's running storage total (what the quota judges): held copies count until filed or deleted. */
async function storageUsed(): Promise<number> {
  const db = stack.service.core.db;
  const [d] = await db
    .select({ userId: schema.domains.userId })
    .from(schema.domains)
    .where(eq(schema.domains.id, domainId));
  const [u] = await db.select().from(schema.storageUsage).where(eq(schema.storageUsage.userId, d!.userId));
  return Number(u?.bytes ?? 0);
}
const hitsFor = (path: string, id: string) => hooks.hitsOn(path).filter((h) => h.json?.id === id);

describe('sender rules at SMTP', () => {
  it('refuses a blocked address at RCPT with 550 5.7.1 and takes other senders', async () => {
    const rule = await addRule('address', 'Spammer@Bad.example', 'block');
    const blocked = await transact({ from: 'spammer@bad.example', to: `hello@${DOMAIN}` });
    expect(blocked.rcpt.code).toBe(550);
    expect(blocked.rcpt.text).toContain('5.7.1');
    const fine = await transact({ from: 'friend@bad.example', to: `hello@${DOMAIN}` });
    expect(fine.data?.code).toBe(250);
    await deleteRule(rule);
    expect((await transact({ from: 'spammer@bad.example', to: `hello@${DOMAIN}` })).data?.code).toBe(250);
  });

  it('blocks a domain with its subdomains, by the envelope at RCPT and by the header From at DATA', async () => {
    const rule = await addRule('domain', 'blocked.example', 'block');
    for (const from of ['a@blocked.example', 'b@mail.blocked.example']) {
      const r = await transact({ from, to: `hello@${DOMAIN}` });
      expect(r.rcpt.code, from).toBe(550);
      expect(r.rcpt.text).toContain('5.7.1');
    }
    expect((await transact({ from: 'c@notblocked.example', to: `hello@${DOMAIN}` })).data?.code).toBe(250);
    const forged = await transact({
      from: 'bounce@relay.example',
      headerFrom: 'ceo@blocked.example',
      to: `hello@${DOMAIN}`,
    });
    expect(forged.rcpt.code).toBe(250);
    expect(forged.data?.code).toBe(550);
    expect(forged.data?.text).toContain('5.7.1');
    // Another domain of the account has its own rules.
    expect((await transact({ from: 'a@blocked.example', to: `hello@${ZERO}` })).data?.code).toBe(250);
    await deleteRule(rule);
  });

  it('blocks a CIDR, and an allow rule wins over it', async () => {
    const block = await addRule('ip', '127.0.0.0/8', 'block');
    const r = await transact({ from: 'anyone@example.org', to: `hello@${DOMAIN}` });
    expect(r.rcpt.code).toBe(550);
    expect(r.rcpt.text).toContain('5.7.1');
    const allow = await addRule('address', 'trusted@example.org', 'allow');
    expect((await transact({ from: 'trusted@example.org', to: `hello@${DOMAIN}` })).data?.code).toBe(250);
    expect((await transact({ from: 'anyone@example.org', to: `hello@${DOMAIN}` })).rcpt.code).toBe(550);
    await deleteRule(block);
    await deleteRule(allow);
    expect((await transact({ from: 'anyone@example.org', to: `hello@${DOMAIN}` })).data?.code).toBe(250);
  });

  it('refuses values that are not an address, a domain or an IP/CIDR', async () => {
    for (const [kind, value] of [
      ['address', 'no-at-sign'],
      ['domain', 'not a domain'],
      ['ip', '10.0.0.0/33'],
      ['ip', '300.1.1.1'],
    ]) {
      const res = await stack.api('POST', `/api/domains/${domainId}/sender-rules`, {
        token,
        body: { kind, value, action: 'block' },
      });
      expect(res.status, `${kind} ${value}`).toBe(400);
    }
  });
});

describe('tenancy of the policy', () => {
  it('another account and another domain’s scoped key get 404 and change nothing', async () => {
    const rule = await addRule('address', 'tenant@bad.example', 'block');
    const scoped = (await stack.api('POST', '/api/keys/scoped', { token, body: { domainId: zeroId } })).body.key;
    for (const cred of [other, scoped]) {
      const calls: [string, string, unknown?][] = [
        ['GET', `/api/domains/${domainId}/sender-rules`],
        ['POST', `/api/domains/${domainId}/sender-rules`, { kind: 'address', value: 'x@y.example', action: 'allow' }],
        ['DELETE', `/api/domains/${domainId}/sender-rules/${rule}`],
        ['GET', `/api/domains/${domainId}/inbound-policy`],
        ['PATCH', `/api/domains/${domainId}/inbound-policy`, { spam_hold_score: 1 }],
      ];
      for (const [method, path, body] of calls) {
        const res = await stack.api(method, path, { token: cred, body });
        expect(res.status, `${method} ${path}`).toBe(404);
      }
    }
    const list = await stack.api('GET', `/api/domains/${domainId}/sender-rules`, { token });
    expect(list.body.data.map((r: { id: string }) => r.id)).toEqual([rule]);
    expect((await stack.api('GET', `/api/domains/${domainId}/inbound-policy`, { token })).body.policy).toMatchObject({
      spam_hold_score: null,
    });
    await deleteRule(rule);
  });
});

describe('DMARC p=reject', () => {
  it('refuses a DMARC fail of a p=reject sender only when the domain says so', async () => {
    dns.zone.set('strict.example', 'TXT', [{ value: 'v=spf1 -all' }]);
    dns.zone.set('_dmarc.strict.example', 'TXT', [{ value: 'v=DMARC1; p=reject' }]);
    dns.zone.set('lax.example', 'TXT', [{ value: 'v=spf1 -all' }]);
    dns.zone.set('_dmarc.lax.example', 'TXT', [{ value: 'v=DMARC1; p=none' }]);
    const before = await transact({ from: 'ceo@strict.example', to: `hello@${DOMAIN}` });
    expect(before.data?.code).toBe(250);
    expect((await messageRow(idOf(before.data)))!.auth).toMatchObject({ dmarc: 'fail' });
    expect(await setPolicy({ refuse_dmarc_reject: true })).toMatchObject({ refuse_dmarc_reject: true });
    const refused = await transact({ from: 'ceo@strict.example', to: `hello@${DOMAIN}` });
    expect(refused.data?.code).toBe(550);
    expect(refused.data?.text).toContain('5.7.1');
    expect(refused.data?.text).toContain('p=reject');
    // p=none fails DMARC too, and is delivered.
    expect((await transact({ from: 'ceo@lax.example', to: `hello@${DOMAIN}` })).data?.code).toBe(250);
    await setPolicy({ refuse_dmarc_reject: false });
  });
});

describe('spam thresholds and the quarantine', () => {
  it('refuses at the end of DATA at the refusal score; an allowed sender passes it', async () => {
    await setPolicy({ spam_refuse_score: 10, spam_hold_score: 5 });
    const refused = await transact({ from: 'loud@spam.example', to: `hello@${DOMAIN}`, score: 12 });
    expect(refused.rcpt.code).toBe(250);
    expect(refused.data?.code).toBe(550);
    expect(refused.data?.text).toContain('5.7.1');
    const allow = await addRule('domain', 'spam.example', 'allow');
    const allowed = await transact({ from: 'loud@spam.example', to: `hello@${DOMAIN}`, score: 12 });
    expect(allowed.data?.code).toBe(250);
    const id = idOf(allowed.data);
    const [hit] = await eventually(async () => {
      const h = hitsFor('/pol', id);
      return h.length ? h : undefined;
    });
    expect(hit!.json.spam).toMatchObject({ scored: true, score: 12 });
    await deleteRule(allow);
  });

  it('holds mail at the hold score and releases it exactly once to its webhook and mailbox', async () => {
    await setPolicy({ spam_refuse_score: null, spam_hold_score: 5 });
    const usedBefore = await storageUsed();
    const sent = await transact({ from: 'grey@maybe.example', to: `hello@${DOMAIN}`, score: 7 });
    expect(sent.data?.code).toBe(250);
    const id = idOf(sent.data);
    const row = await messageRow(id);
    expect(row).toMatchObject({ status: 'held', heldReason: expect.stringContaining('7') });
    // Its raw copy counts against the account's storage while held.
    expect(await storageUsed()).toBe(usedBefore + row!.sizeBytes!);
    expect(row!.heldUntil! - row!.receivedAt!).toBe(10 * 86_400_000);
    // Held: nothing delivered, nothing filed.
    expect(await mailboxCopies(id)).toEqual([]);
    expect(hitsFor('/pol', id)).toEqual([]);
    const listed = await stack.api('GET', '/api/inbound/held', { token });
    expect(listed.status).toBe(200);
    expect(listed.body.data.map((m: { id: string }) => m.id)).toContain(id);
    expect(listed.body.data.find((m: { id: string }) => m.id === id)).toMatchObject({
      subject: sent.subject,
      spam: { scored: true, score: 7 },
    });
    // Another account sees none of it and cannot release it.
    expect((await stack.api('GET', '/api/inbound/held', { token: other })).body.data).toEqual([]);
    expect((await stack.api('POST', `/api/inbound/held/${id}/release`, { token: other })).status).toBe(404);

    // Two releases at once: one delivers, the other is told it is not held any more.
    const [r1, r2] = await Promise.all([
      stack.api('POST', `/api/inbound/held/${id}/release`, { token }),
      stack.api('POST', `/api/inbound/held/${id}/release`, { token }),
    ]);
    expect([r1.status, r2.status].sort()).toEqual([200, 409]);
    expect((await stack.api('POST', `/api/inbound/held/${id}/release`, { token })).body.code).toBe('already_released');
    await eventually(async () => (hitsFor('/pol', id).length ? true : undefined));
    const delivered = await eventually(async () => {
      const d = (await stack.api('GET', `/api/messages/${id}`, { token })).body.deliveries;
      return d?.length && d.every((x: { status: string }) => x.status === 'delivered') ? d : undefined;
    });
    expect(delivered).toHaveLength(1);
    expect(hitsFor('/pol', id)).toHaveLength(1);
    const copies = await mailboxCopies(id);
    expect(copies).toHaveLength(1);
    // Released: the mailbox body (with its X-Spam-* lines) is its one stored copy, counted once.
    const [body] = await stack.service.core.db
      .select({ size: schema.mailboxBodies.size })
      .from(schema.mailboxBodies)
      .where(eq(schema.mailboxBodies.id, copies[0]!.bodyId));
    expect(await storageUsed()).toBe(usedBefore + body!.size);
    expect((await messageRow(id))!.status).not.toBe('held');
    expect((await messageRow(id))!.releasedAt).toEqual(expect.any(Number));
    expect(
      (await stack.api('GET', '/api/inbound/held', { token })).body.data.map((m: { id: string }) => m.id),
    ).not.toContain(id);
  });

  it('deletes held mail on request, and the sweep deletes it once expired', async () => {
    await setPolicy({ spam_hold_score: 5 });
    const usedBefore = await storageUsed();
    const a = idOf((await transact({ from: 'grey@maybe.example', to: `one@${DOMAIN}`, score: 6 })).data);
    const b = idOf((await transact({ from: 'grey@maybe.example', to: `two@${DOMAIN}`, score: 6 })).data);
    expect((await messageRow(a))!.status).toBe('held');
    const sizeB = (await messageRow(b))!.sizeBytes!;
    expect(await storageUsed()).toBe(usedBefore + (await messageRow(a))!.sizeBytes! + sizeB);
    expect((await stack.api('DELETE', `/api/inbound/held/${a}`, { token: other })).status).toBe(404);
    expect((await stack.api('DELETE', `/api/inbound/held/${a}`, { token })).status).toBe(200);
    expect(await messageRow(a)).toBeUndefined();
    expect(await storageUsed()).toBe(usedBefore + sizeB);
    expect((await stack.api('DELETE', `/api/inbound/held/${a}`, { token })).status).toBe(404);

    // Not expired yet: the sweep leaves it.
    const t = await connectTemporal({
      address: stack.service.temporalAddress,
      namespace: 'default',
      taskQueue: stack.config.temporal.taskQueue,
    });
    try {
      const sweep = () =>
        t.client.workflow.execute(sweepHeldInboundWorkflow, {
          taskQueue: stack.config.temporal.taskQueue,
          workflowId: `held-sweep-${Date.now()}-${Math.random().toString(36).slice(2)}`,
        });
      await sweep();
      expect((await messageRow(b))!.status).toBe('held');
      await stack.service.core.db
        .update(schema.messages)
        .set({ heldUntil: Date.now() - 1000 })
        .where(eq(schema.messages.id, b));
      expect((await sweep()).deleted).toBeGreaterThanOrEqual(1);
      expect(await messageRow(b)).toBeUndefined();
      expect(await storageUsed()).toBe(usedBefore);
      expect(
        await stack.service.core.db.select().from(schema.inboundRaw).where(eq(schema.inboundRaw.messageId, b)),
      ).toEqual([]);
    } finally {
      await t.connection.close();
    }
  });

  it('a zero-retention domain never holds: it delivers below the refusal score and refuses at it', async () => {
    await setPolicy({ spam_hold_score: 5, spam_refuse_score: 10 }, zeroId);
    const sent = await transact({ from: 'grey@maybe.example', to: `hello@${ZERO}`, score: 7 });
    expect(sent.data?.code).toBe(250);
    const id = idOf(sent.data);
    await eventually(async () => (hitsFor('/zero', id).length ? true : undefined));
    expect(
      (await stack.api('GET', '/api/inbound/held', { token })).body.data.map((m: { id: string }) => m.id),
    ).not.toContain(id);
    const refused = await transact({ from: 'grey@maybe.example', to: `hello@${ZERO}`, score: 11 });
    expect(refused.data?.code).toBe(550);
  });
});
