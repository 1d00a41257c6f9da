import { eq } from 'drizzle-orm';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schema } from '../db/index.js';
import { expectHealthUp, watchHealth } from './helpers/health-probe.js';
import { smtpData } from './helpers/hostile.js';
import { rawImap } from './helpers/imap-wire.js';
import { mintPassword } from './helpers/mailbox.js';
import { rawSmtp } from './helpers/smtp-client.js';
import { eventually, startStack, type TestStack } from './helpers/stack.js';
import { startWebhookReceiver } from './helpers/webhook-receiver.js';

/**
 * Property tests over every parser reachable from outside, through the running service's real protocols:
 * SMTP DATA to a hosted address with a webhook (MIME parsing) and to a bounce address (reports), IMAP
 * commands, HTML and template rendering with tracking, CSV import, JSON bodies. Inputs are built from the
 * pieces that make parsers slow or crash (blank runs, soft breaks, nested parts, brackets, quotes,
 * unterminated tags). Each input is answered within ANSWER_MS, and /api/health, probed from another
 * process for the whole property, answers every probe 200 in under a second. Runs are few (the suite
 * shares two cores): the hostile corpus (test/abuse-hostile.test.ts) carries the large inputs.
 */
const SERVICE = 'props.svc.test';
const DOMAIN = `inbound.${SERVICE}`;
const ANSWER_MS = 10_000;
const INBOX = `props@${DOMAIN}`;
const BOUNCE = `bounce+msg_${'b'.repeat(24)}@bounces.${DOMAIN}`;
let stack: TestStack;
let hooks: Awaited<ReturnType<typeof startWebhookReceiver>>;
let key: string;
let list: string;
let imap: { user: string; secret: string };

beforeAll(async () => {
  hooks = await startWebhookReceiver();
  stack = await startStack({ SERVICE_DOMAIN: SERVICE });
  const s = (
    await stack.api('POST', '/api/auth/signup', { body: { email: 'props@example.com', password: 'props password' } })
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
  list = (await stack.api('POST', '/api/lists', { token: key, body: { name: 'props' } })).body.id;
  imap = {
    user: `reader@${DOMAIN}`,
    secret: (await mintPassword(stack, s.token, { domainId, address: 'reader', protocols: ['imap'] })).secret,
  };
});
afterAll(async () => {
  await stack?.stop();
  await hooks?.close();
});

/** Runs a property with the health probe around it; asserts health after (and the property's own failure first). */
async function withHealth(property: () => Promise<void>): Promise<void> {
  const health = await watchHealth(stack.baseUrl, 50);
  const failure = await property().then(
    () => undefined,
    (err: unknown) => err,
  );
  const samples = await health.stop();
  if (failure) throw failure;
  expectHealthUp(samples);
}

/** Strings glued from pieces: how the hostile shapes appear at random sizes and mixes. */
const soup = (pieces: string[], maxPieces: number) =>
  fc
    .array(
      fc.oneof(
        fc.constantFrom(...pieces),
        fc.tuple(fc.constantFrom(...pieces), fc.integer({ min: 1, max: 2000 })).map(([p, n]) => p.repeat(n)),
      ),
      { maxLength: maxPieces },
    )
    .map((xs) => xs.join(''));

const ENCODINGS = ['7bit', '8bit', 'quoted-printable', 'base64', 'binary', 'x-unknown', ''];
const bodyPieces = [' ', '\t', '\r\n', '=\r\n', '=20', '=', 'QUJD', '====', 'x', '\u00a0', '--b', '<', '"', ';', 'a'];
const leaf = fc
  .record({
    cte: fc.constantFrom(...ENCODINGS),
    type: fc.constantFrom(
      'text/plain',
      'text/html',
      'message/delivery-status',
      'message/rfc822',
      'application/octet-stream',
      'text/rfc822-headers',
    ),
    body: soup(bodyPieces, 12),
  })
  .map(({ cte, type, body }) => `Content-Type: ${type}\r\nContent-Transfer-Encoding: ${cte}\r\n\r\n${body}\r\n`);
/** A MIME entity: a leaf, or a multipart (mixed or report) of up to three entities, three levels deep at most. */
const entity: fc.Arbitrary<string> = fc.letrec<{ node: string }>((tie) => ({
  node: fc.oneof(
    { depthSize: 'small', maxDepth: 3 },
    leaf,
    fc
      .tuple(
        fc.constantFrom('mixed', 'report; report-type=delivery-status', 'alternative'),
        fc.array(tie('node'), { maxLength: 3 }),
        fc.nat(999),
      )
      .map(
        ([kind, parts, n]) =>
          `Content-Type: multipart/${kind}; boundary="p${n}"\r\n\r\n${parts.map((p) => `--p${n}\r\n${p}`).join('')}--p${n}--\r\n`,
      ),
  ),
})).node;
const extraHeaders = fc
  .array(
    fc.tuple(
      fc.constantFrom('Subject', 'X-Hostile', 'Content-Type', 'Received', 'Message-ID', 'In-Reply-To', 'From'),
      soup([' ', '\t', '=?utf-8?q?', '?=', '<', '>', '"', ';', 'a=b', '\r\n ', 'x'], 6),
    ),
    { maxLength: 5 },
  )
  .map((hs) => hs.map(([n, v]) => `${n}: ${v}\r\n`).join(''));

describe('properties over the running service', () => {
  it('SMTP DATA to a webhook address and to a bounce address: every message is answered, health stays up', async () => {
    await withHealth(() =>
      fc.assert(
        fc.asyncProperty(fc.constantFrom(INBOX, BOUNCE), extraHeaders, entity, async (rcpt, headers, body) => {
          const c = await rawSmtp(stack.service.smtpPort!);
          try {
            expect((await c.command('EHLO props.example')).code).toBe(250);
            expect((await c.command('MAIL FROM:<a@far.example>')).code).toBe(250);
            expect((await c.command(`RCPT TO:<${rcpt}>`)).code).toBe(250);
            expect((await c.command('DATA')).code).toBe(354);
            await c.write(
              smtpData(
                Buffer.from(`From: a@far.example\r\nTo: ${rcpt}\r\n${headers}MIME-Version: 1.0\r\n${body}`, 'latin1'),
              ),
            );
            const end = await c.reply(ANSWER_MS);
            expect(end.code).toBeGreaterThanOrEqual(200);
          } finally {
            c.close();
          }
        }),
        { numRuns: 24, endOnFailure: true },
      ),
    );
  }, 120_000);

  it('IMAP commands after login: each is answered (tagged, or an untagged BAD or BYE)', async () => {
    const arg = fc.oneof(
      fc.stringMatching(/^[A-Za-z0-9.*%:,\\-]{1,12}$/),
      soup(['(', ')', '"', '\\', '*', '%', '1:*', ',', ' ', 'OR', 'NOT', 'BODY[', ']', '<0.10>', 'x'], 8),
      fc.tuple(fc.integer({ min: 0, max: 4096 })).map(([n]) => `{${n}+}\r\n${'a'.repeat(n)}`),
    );
    const name = fc.constantFrom(
      'SEARCH',
      'UID SEARCH',
      'FETCH',
      'UID FETCH',
      'LIST',
      'LSUB',
      'STATUS',
      'STORE',
      'COPY',
      'EXAMINE',
      'NOOP',
      'ID',
      'XYZZY',
      '',
    );
    await withHealth(() =>
      fc.assert(
        fc.asyncProperty(name, fc.array(arg, { maxLength: 5 }), async (cmd, args) => {
          const c = await rawImap(stack.service.imapPort!);
          try {
            expect(await c.cmd('p0', `LOGIN ${imap.user} ${imap.secret}`)).toMatch(/^p0 OK/);
            expect(await c.cmd('p1', 'SELECT INBOX')).toMatch(/^p1 OK/);
            const start = c.text.length;
            c.send(`p2 ${cmd} ${args.join(' ')}\r\n`);
            const answered = () => /(^|\r\n)(p2 (OK|NO|BAD)|\* (BAD|BYE))/.test(c.text.slice(start));
            await c.until(() => answered() || c.closed, ANSWER_MS);
            expect(answered(), c.text.slice(start, start + 300)).toBe(true);
          } finally {
            c.close();
          }
        }),
        { numRuns: 24, endOnFailure: true },
      ),
    );
  }, 120_000);

  it('HTML and templates with tracking: each send or template is answered 2xx or 4xx, and what is accepted is delivered', async () => {
    const html = soup(
      [
        '<a ',
        '<a href="https://x.test/',
        '<body',
        '<BODY ',
        '>',
        '"',
        "'",
        '{{',
        '}}',
        '{{a}}',
        '{{#each',
        '<!--',
        '-->',
        '<script>',
        '&amp;',
        '&',
        ' ',
        '\n',
        'x',
        '</a>',
        '<img src=',
        '=',
        '<',
      ],
      10,
    );
    const sent: string[] = [];
    await withHealth(async () => {
      await fc.assert(
        fc.asyncProperty(html, html, fc.boolean(), async (body, subject, viaTemplate) => {
          let payload: Record<string, unknown> = { html: body, subject: `s ${subject}`.slice(0, 998) };
          if (viaTemplate) {
            const t = await stack.api('POST', '/api/templates', { token: key, body: { name: 'prop', ...payload } });
            expect(t.status, JSON.stringify(t.body).slice(0, 300)).toBeLessThan(500);
            if (t.status >= 300) return;
            payload = { templateId: t.body.id };
          }
          const res = await stack.api('POST', '/v1/send', {
            token: key,
            body: {
              from: `hello@${DOMAIN}`,
              to: 'r@example.com',
              trackClicks: true,
              trackOpens: true,
              templateData: { a: '<b>' },
              ...payload,
            },
          });
          expect(res.status, JSON.stringify(res.body).slice(0, 300)).toBeLessThan(500);
          if (res.status < 300) sent.push(res.body.id);
        }),
        { numRuns: 20, endOnFailure: true },
      );
      // Rendering and tracking run at delivery: inside the probed window too.
      for (const id of sent) {
        await eventually(
          async () =>
            !['queued', 'sending'].includes(
              (await stack.api('GET', `/api/messages/${id}`, { token: key })).body?.message?.status,
            ),
          ANSWER_MS,
        );
      }
    });
  }, 120_000);

  it('CSV imports: each is answered 2xx or 4xx, and every accepted import finishes', async () => {
    const csv = soup(['"', '""', ',', '\n', '\r\n', '\r', 'email', 'a@b.example', ' ', 'x', ';', '\t', '\u00ff'], 12);
    const started: string[] = [];
    await withHealth(async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.oneof(
            csv,
            csv.map((x) => `email,name\n${x}`),
          ),
          async (text) => {
            const res = await fetch(`${stack.baseUrl}/api/lists/${list}/import`, {
              method: 'POST',
              headers: { authorization: `Bearer ${key}`, 'content-type': 'text/csv' },
              body: text,
              signal: AbortSignal.timeout(ANSWER_MS),
            });
            const answer = await res.text();
            expect(res.status, answer.slice(0, 300)).toBeLessThan(500);
            if (res.status < 300) started.push((JSON.parse(answer) as { id: string }).id);
          },
        ),
        { numRuns: 20, endOnFailure: true },
      );
      for (const id of started) {
        await eventually(
          async () =>
            (await stack.api('GET', `/api/lists/${list}/imports/${id}`, { token: key })).body?.status !== 'running',
          ANSWER_MS,
        );
      }
    });
  }, 120_000);

  it('JSON bodies, well-formed or not, to the routes that take them: answered, never a 5xx', async () => {
    const routes = [
      '/v1/send',
      '/v1/send/batch',
      '/v1/events',
      '/api/contacts',
      '/api/lists',
      '/api/templates',
      '/api/broadcasts',
      '/api/routes',
      '/api/auth/login',
    ];
    const deep = fc
      .tuple(fc.integer({ min: 1, max: 40_000 }), fc.constantFrom(['[', ']'], ['{"a":', '}']))
      .map(([n, [o, c]]) => `${o!.repeat(n)}0${c!.repeat(n)}`);
    const body = fc.oneof(
      fc.json({ depthSize: 'medium' }),
      deep,
      deep.map((d) => `{"payload":{"a":${d}},"name":"n","email":"a@b.example","attributes":{"a":${d}}}`),
      fc.string({ maxLength: 200 }),
    );
    await withHealth(() =>
      fc.assert(
        fc.asyncProperty(fc.constantFrom(...routes), body, async (path, raw) => {
          const res = await fetch(`${stack.baseUrl}${path}`, {
            method: 'POST',
            headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
            body: raw,
            signal: AbortSignal.timeout(ANSWER_MS),
          });
          const answer = await res.text();
          expect(res.status, `${path} ${raw.slice(0, 200)} → ${answer.slice(0, 300)}`).toBeLessThan(500);
        }),
        { numRuns: 60, endOnFailure: true },
      ),
    );
  }, 120_000);
});
