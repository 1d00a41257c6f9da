import { request } from 'node:http';
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schema } from '../db/index.js';
import { describeHealth, expectHealthUp, watchHealth } from './helpers/health-probe.js';
import {
  expand,
  loadCorpus,
  smtpData,
  type HostileCase,
  type HttpCase,
  type ImapCase,
  type SmtpCase,
} from './helpers/hostile.js';
import { rawImap } from './helpers/imap-wire.js';
import { mintPassword } from './helpers/mailbox.js';
import { rawSmtp } from './helpers/smtp-client.js';
import { eventually, startStack, type TestStack } from './helpers/stack.js';
import { startWebhookReceiver } from './helpers/webhook-receiver.js';

/**
 * The hostile corpus (test/fixtures/hostile/corpus.json, issue 29) sent to a running service over its
 * real protocols: SMTP to the ingress (a bounce address: the report parser; a hosted address with a
 * webhook: MIME parsing to the webhook), HTTP to the API, IMAP. Each input must get a definite answer
 * (an SMTP reply, an HTTP status, a tagged IMAP answer or BYE; refusing is fine, silence is not) within
 * ANSWER_MS, and /api/health, probed from another process meanwhile, must answer every probe in under
 * a second. What a case starts (a message's delivery, an import) is awaited inside the probed window.
 */
const SERVICE = 'hostile.svc.test';
const DOMAIN = `inbound.${SERVICE}`;
/** The parse pool's budget here (the default is 20 s): a task past it is refused, well within ANSWER_MS. */
const PARSE_TIMEOUT_MS = 8000;
const ANSWER_MS = 15_000;
let stack: TestStack;
let hooks: Awaited<ReturnType<typeof startWebhookReceiver>>;
const vars: Record<string, string> = {
  FROM: `hello@${DOMAIN}`,
  INBOX: `hostile@${DOMAIN}`,
  BOUNCE: `bounce+msg_${'a'.repeat(24)}@bounces.${DOMAIN}`,
};
let key: string;
let imap: { user: string; secret: string };

beforeAll(async () => {
  hooks = await startWebhookReceiver();
  stack = await startStack({ SERVICE_DOMAIN: SERVICE, PARSE_TIMEOUT_MS: String(PARSE_TIMEOUT_MS) });
  const s = (
    await stack.api('POST', '/api/auth/signup', {
      body: { email: 'hostile@example.com', password: 'hostile password' },
    })
  ).body;
  await stack.service.core.db.update(schema.users).set({ emailVerified: true }).where(eq(schema.users.id, s.user.id));
  key = (await stack.api('GET', '/api/keys', { token: s.token })).body.key;
  const domainId = (
    await stack.api('POST', '/api/domains/subdomain', { token: s.token, body: { subdomain: 'inbound' } })
  ).body.domain.id as string;
  expect(
    (await stack.api('PUT', `/api/domains/${domainId}/webhook`, { token: s.token, body: { url: `${hooks.base}/in` } }))
      .status,
  ).toBe(200);
  vars.LIST = (await stack.api('POST', '/api/lists', { token: key, body: { name: 'hostile' } })).body.id;
  await stack.api('POST', `/api/lists/${vars.LIST}/contacts`, { token: key, body: { emails: ['member@example.com'] } });
  const pw = await mintPassword(stack, s.token, { domainId, address: 'reader', protocols: ['imap'] });
  imap = { user: `reader@${DOMAIN}`, secret: pw.secret };
});
afterAll(async () => {
  await stack?.stop();
  await hooks?.close();
});

/** SMTP: the envelope, then DATA; answers the replies that decided the case. */
async function runSmtp(c: SmtpCase): Promise<string[]> {
  const rcpt = c.rcpt[0]!.replace(/\{([A-Z]+)\}/, (_m, v: string) => vars[v]!);
  const client = await rawSmtp(stack.service.smtpPort!);
  try {
    expect((await client.command('EHLO hostile.example')).code).toBe(250);
    expect((await client.command('MAIL FROM:<a@far.example>')).code).toBe(250);
    const to = await client.command(`RCPT TO:<${rcpt}>`);
    if (to.code !== 250) return [`RCPT ${to.code} ${to.text}`]; // refused at the door: a definite answer
    expect((await client.command('DATA')).code).toBe(354);
    await client.write(smtpData(expand(c.data, { ...vars, RCPT: rcpt })));
    const end = await client.reply(ANSWER_MS);
    expect(end.code, end.text).toBeGreaterThanOrEqual(200);
    return [`DATA ${end.code} ${end.text.slice(0, 120)}`];
  } finally {
    client.close();
  }
}

/** One HTTP call over node:http, so an answer that comes while the body is still being written is read. */
function call(
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: Buffer,
): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    let answered = false;
    const req = request(
      `${stack.baseUrl}${path}`,
      {
        method,
        headers: { ...headers, ...(body ? { 'content-length': String(body.length) } : {}) },
        timeout: ANSWER_MS,
      },
      (res) => {
        answered = true;
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => {
          text += d;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer to ${method} ${path} within ${ANSWER_MS} ms`)));
    // A server that answers early (413) and closes makes the rest of the write fail: the answer stands.
    req.on('error', (err) => {
      if (!answered) reject(err);
    });
    req.end(body);
  });
}

async function runHttp(c: HttpCase): Promise<string[]> {
  const seen: string[] = [];
  const local = { ...vars };
  for (const step of c.steps) {
    const path = expand(step.path, local).toString('latin1');
    const headers: Record<string, string> = { 'content-type': step.contentType ?? 'application/json' };
    if (step.auth !== 'none') headers.authorization = `Bearer ${key}`;
    const res = await call(step.method, path, headers, step.body === undefined ? undefined : expand(step.body, local));
    seen.push(`${step.method} ${path} ${res.status} ${res.text.slice(0, 160)}`);
    expect(res.status, seen.join('\n')).toBeGreaterThanOrEqual(200);
    if (step.expect) expect(`${Math.floor(res.status / 100)}xx`, seen.join('\n')).toBe(step.expect);
    if (res.status >= 300) continue;
    const id = (JSON.parse(res.text) as { id?: string }).id;
    if (step.save && id) local[step.save] = id;
    if (step.settle === 'message' && id) {
      const status = await eventually(async () => {
        const s = (await stack.api('GET', `/api/messages/${id}`, { token: key })).body?.message?.status as
          string | undefined;
        return s && !['queued', 'sending', 'deferred'].includes(s) ? s : undefined;
      }, ANSWER_MS);
      seen.push(`message ${status}`);
    }
    if (step.settle === 'import' && id) {
      const status = await eventually(async () => {
        const s = (await stack.api('GET', `/api/lists/${vars.LIST}/imports/${id}`, { token: key })).body?.status as
          string | undefined;
        return s && s !== 'running' ? s : undefined;
      }, ANSWER_MS);
      seen.push(`import ${status}`);
    }
  }
  return seen;
}

/** IMAP: logged in with INBOX selected (unless the case is about the pre-auth state), then the command. */
async function runImap(c: ImapCase): Promise<string[]> {
  const client = await rawImap(stack.service.imapPort!);
  try {
    if (c.login !== false) {
      expect(await client.cmd('h0', `LOGIN ${imap.user} ${imap.secret}`)).toMatch(/^h0 OK/);
      expect(await client.cmd('h1', 'SELECT INBOX')).toMatch(/^h1 OK/);
    }
    const start = client.text.length;
    client.send(Buffer.concat([Buffer.from('h2 '), expand(c.command, vars), Buffer.from('\r\n')]));
    // The tagged completion, or an untagged BAD (a line the server cannot parse has no tag it trusts) or BYE.
    const answered = () => /(^|\r\n)(h2 (OK|NO|BAD)|\* (BAD|BYE))[^\r]*\r\n/.exec(client.text.slice(start));
    await client.until(() => Boolean(answered()) || client.closed, ANSWER_MS);
    const m = answered();
    expect(m, `closed without an answer: ${client.text.slice(start, start + 300)}`).not.toBeNull();
    return [m![0].trim().slice(0, 160)];
  } finally {
    client.close();
  }
}

const run = (c: HostileCase) => (c.protocol === 'smtp' ? runSmtp(c) : c.protocol === 'http' ? runHttp(c) : runImap(c));
/** One test per (case, recipient): an SMTP case goes to each address it lists. */
const cases = loadCorpus().flatMap((c): [string, HostileCase][] =>
  c.protocol === 'smtp'
    ? c.rcpt.map((r) => [`SMTP to ${r.slice(1, -1).toLowerCase()}: ${c.name}`, { ...c, rcpt: [r] }])
    : [[`${c.protocol.toUpperCase()}: ${c.name}`, c]],
);

describe('the hostile corpus over the real protocols', () => {
  it.each(cases)(
    '%s',
    async (_name, c) => {
      const health = await watchHealth(stack.baseUrl, 50);
      const outcome = await run(c).then(
        (answers) => ({ answers }),
        (error: unknown) => ({ error }),
      );
      const samples = await health.stop();
      if ('error' in outcome) throw new Error(`${(outcome.error as Error).message}\n${describeHealth(samples)}`);
      expect(outcome.answers.length).toBeGreaterThan(0);
      console.info(`[hostile] ${c.name}:\n  ${outcome.answers.join('\n  ')}`);
      expectHealthUp(samples, { minProbes: 1 });
    },
    90_000,
  );
});
