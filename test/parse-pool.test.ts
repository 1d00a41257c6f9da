import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AppError } from '../core/errors.js';
import { parseTasksOverBudget } from '../core/metrics.js';
import { createParsePool, openParsePool, parseMail, runParse, type ParsePool } from '../core/parsing/pool.js';
import { ApplicationFailure } from '@temporalio/common';
import { toActivityFailure } from '../activities/failures.js';
import { expectHealthUp, watchHealth } from './helpers/health-probe.js';
import { FROM_DOMAIN, SERVICE, startSendingStack, type SendingStack } from './helpers/sending.js';
import { rawSmtp } from './helpers/smtp-client.js';

/** A 10 MB HTML-only message: mailparser's HTML-to-text takes seconds on it (5 MB: 1.3 s on a quiet machine), the Subject alone a fraction of one. */
const slowMail = () =>
  Buffer.from(`Subject: slow\r\nContent-Type: text/html\r\n\r\n${'<p>hello world</p>\r\n'.repeat(500_000)}`);
const small = Buffer.from(
  'From: Ann <ann@x.test>\r\nSubject: hi\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nhello\r\n--b\r\n' +
    'Content-Type: application/octet-stream; name=a.bin\r\nContent-Transfer-Encoding: base64\r\n\r\nAAEC\r\n--b--\r\n',
);
/** Refusals of `task` counted so far, over the time budget or (`budget`) the memory one too. */
const overBudget = async (task: string, budgets = ['time', 'memory']) =>
  (await parseTasksOverBudget.get()).values
    .filter((v) => v.labels.task === task && budgets.includes(String(v.labels.budget)))
    .reduce((n, v) => n + v.value, 0);

/** Runs `work` while a 10 ms timer measures how late the event loop answers; the worst lateness in ms. */
async function worstTimerLag<T>(work: Promise<T>): Promise<{ result: T; worstMs: number; ticks: number }> {
  let worstMs = 0;
  let ticks = 0;
  let done = false;
  const ticking = (async () => {
    while (!done) {
      const at = performance.now();
      await new Promise((r) => setTimeout(r, 10));
      worstMs = Math.max(worstMs, performance.now() - at - 10);
      ticks += 1;
    }
  })();
  try {
    return { result: await work, worstMs, ticks };
  } finally {
    done = true;
    await ticking;
  }
}

describe('parse pool', () => {
  let pool: ParsePool;
  beforeAll(() => {
    pool = createParsePool({ threads: 1, timeoutMs: 30_000, memoryMb: 1024 });
  });
  afterAll(async () => {
    await pool.close();
  });

  it('parses in a thread and answers Buffers again, not the Uint8Arrays structured clone makes', async () => {
    const mail = await pool.run('parseMail', small);
    expect(mail.subject).toBe('hi');
    expect(mail.headers.get('subject')).toBe('hi');
    // The shared pool's helper puts the Buffer back, as the inbound service reads `content.toString('base64')`.
    const again = await parseMail(small);
    expect(Buffer.isBuffer(again.attachments[0]!.content)).toBe(true);
    expect(again.attachments[0]!.content.toString('base64')).toBe('AAEC');
  });

  it('a refusal thrown in the thread comes back as the same AppError', async () => {
    const err = await pool.run('renderSend', { explicit: { html: '<p>x</p>' } }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AppError);
    expect(err).toMatchObject({ status: 400, code: 'subject_required' });
    const csv = await pool.run('parseCsv', { csv: 'name\nann\n', fromSeq: 0 }).catch((e: unknown) => e);
    expect(csv).toMatchObject({ status: 400, code: 'invalid_csv' });
  });

  it('a task over its budget is ended: answered 422 parse_budget_exceeded, counted, and its thread does not keep running', async () => {
    const before = await overBudget('parseMail', ['time']);
    const started = performance.now();
    const err = await pool.run('parseMail', slowMail(), { timeoutMs: 300 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AppError);
    expect(err).toMatchObject({ status: 422, code: 'parse_budget_exceeded', retryable: false });
    expect((err as AppError).message).toContain('300 ms');
    expect(performance.now() - started).toBeLessThan(2_000);
    expect(await overBudget('parseMail', ['time'])).toBe(before + 1);
    // One thread only: had the over-budget parse kept its thread, this task would wait the seconds it still needed.
    const next = performance.now();
    expect(await pool.run('mailSubject', small)).toBe('hi');
    expect(performance.now() - next).toBeLessThan(3_000);
  });

  it('the budget runs from when a thread starts the task: waiting behind a long parse is not held against it', async () => {
    // One thread, held for 1 s by a parse that then passes its budget.
    const occupant = pool.run('parseMail', slowMail(), { timeoutMs: 1_000 }).catch((e: unknown) => e);
    const started = performance.now();
    expect(await pool.run('mailSubject', small, { timeoutMs: 300 })).toBe('hi');
    expect(performance.now() - started).toBeGreaterThan(900); // it waited three of its budgets
    expect(await occupant).toMatchObject({ code: 'parse_budget_exceeded' });
  });

  it('a task no thread starts in time is refused as busy, retryable (SMTP 451, HTTP 503), not as over budget', async () => {
    const occupant = pool.run('parseMail', slowMail(), { timeoutMs: 1_000 }).catch((e: unknown) => e);
    const err = await pool.run('mailSubject', small, { queueMs: 200 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AppError);
    expect(err).toMatchObject({ status: 503, code: 'parse_busy', retryable: true });
    expect(await occupant).toMatchObject({ code: 'parse_budget_exceeded' });
  });

  it('a workflow activity gets the refusal as a non-retryable failure with its reason', async () => {
    const err = await pool.run('parseMail', slowMail(), { timeoutMs: 100 }).catch((e: unknown) => e);
    const failure = toActivityFailure(err);
    expect(failure).toBeInstanceOf(ApplicationFailure);
    expect(failure).toMatchObject({ nonRetryable: true, type: 'parse_budget_exceeded' });
    expect(failure.message).toContain('processing budget');
  });

  it('the event loop keeps answering while a thread parses for a long time', async () => {
    const { result, worstMs, ticks } = await worstTimerLag(
      pool.run('parseMail', slowMail(), { timeoutMs: 1_000 }).catch((e: unknown) => e),
    );
    expect(result).toMatchObject({ code: 'parse_budget_exceeded' });
    // The same parse on this loop would hold every timer for the whole parse (seconds).
    expect(ticks).toBeGreaterThan(10);
    expect(worstMs).toBeLessThan(250);
  });
});

describe('the process pool', () => {
  it('stays open while a core holds it and closes with the last hold', async () => {
    const a = openParsePool({ threads: 1, timeoutMs: 5_000, memoryMb: 256 });
    const b = openParsePool({ threads: 1, timeoutMs: 5_000, memoryMb: 256 });
    await a.close();
    await a.close(); // a second close of one hold releases nothing more
    expect(await runParse('mailSubject', small)).toBe('hi');
    await b.close();
    // Work handed in after the last close gets a pool on demand (its idle threads never hold the process).
    expect(await runParse('mailSubject', small)).toBe('hi');
  });
});

describe('the running service with the pool', () => {
  const DOMAIN = FROM_DOMAIN;
  let env: SendingStack;
  beforeAll(async () => {
    // A 1 s budget: the slow inputs below need seconds, every other message here a few milliseconds.
    env = await startSendingStack({ env: { PARSE_TIMEOUT_MS: '1000' } });
  });
  afterAll(async () => {
    await env?.stop();
  });

  /** One anonymous message, its DATA written and answered while health is probed from another process. */
  async function deliver(rcpt: string, message: string) {
    const c = await rawSmtp(env.stack.service.smtpPort!);
    try {
      expect((await c.command('EHLO client.example')).code).toBe(250);
      expect((await c.command('MAIL FROM:<>')).code).toBe(250);
      expect((await c.command(`RCPT TO:<${rcpt}>`)).code).toBe(250);
      expect((await c.command('DATA')).code).toBe(354);
      const health = await watchHealth(env.stack.baseUrl, 50);
      await c.write(`${message}\r\n.\r\n`);
      const answer = await c.reply(60_000);
      return { answer, samples: await health.stop() };
    } finally {
      c.close();
    }
  }

  const spaces = `${' '.repeat(200_000)}x`;

  it('a quoted-printable body of 200,000 spaces to bounce+x@SERVICE_DOMAIN: answered, health under a second meanwhile', async () => {
    const plain = await deliver(
      `bounce+x@${SERVICE}`,
      `Subject: qp\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n${spaces}`,
    );
    expect(plain.answer.code).toBe(250);
    expectHealthUp(plain.samples);
    // The same run inside a report's delivery-status part, which the report parser does decode (in the pool).
    const report = await deliver(
      `bounce+x@${SERVICE}`,
      [
        'Subject: report',
        'Content-Type: multipart/report; report-type=delivery-status; boundary=r',
        '',
        '--r',
        'Content-Type: message/delivery-status',
        'Content-Transfer-Encoding: quoted-printable',
        '',
        spaces,
        '--r--',
      ].join('\r\n'),
    );
    expect([250, 554]).toContain(report.answer.code);
    if (report.answer.code === 554) expect(report.answer.text).toContain('5.6.0');
    expectHealthUp(report.samples);
  });

  it('a message past the parse budget is refused 554 5.6.0 and counted; health answers meanwhile and the next message is stored', async () => {
    const before = await overBudget('parseMail');
    const slow = await deliver(
      `someone@${DOMAIN}`,
      `From: a@far.example\r\nSubject: slow\r\nContent-Type: text/html\r\n\r\n${'<p>hello world</p>\r\n'.repeat(400_000)}`,
    );
    expect(slow.answer.code).toBe(554);
    expect(slow.answer.text).toContain('5.6.0');
    expect(slow.answer.text).toMatch(/processing (budget|memory limit)/);
    expectHealthUp(slow.samples);
    expect(await overBudget('parseMail')).toBe(before + 1);
    const next = await deliver(`someone@${DOMAIN}`, 'From: a@far.example\r\nSubject: after\r\n\r\nstill here');
    expect(next.answer.code).toBe(250);
    expect(next.answer.text).toMatch(/queued as msg_/);
  });

  it('a message mailparser refuses (multipart nested 1,000 deep) is answered 554 5.6.0 at once, not 451 to be retried', async () => {
    let nested = 'From: a@far.example\r\nSubject: deep\r\n';
    for (let i = 0; i < 1000; i++) nested += `Content-Type: multipart/mixed; boundary=b${i}\r\n\r\n--b${i}\r\n`;
    const deep = await deliver(`someone@${DOMAIN}`, `${nested}Content-Type: text/plain\r\n\r\nx`);
    expect(deep.answer.code).toBe(554);
    expect(deep.answer.text).toContain('5.6.0 The message could not be parsed');
    expectHealthUp(deep.samples);
  });

  it('a send whose merge would pass the limits is answered 422 JSON, not run on the API loop', async () => {
    const health = await watchHealth(env.stack.baseUrl, 50);
    const res = await env.send({
      to: 'merge@rcpt.test',
      html: '{{v}}'.repeat(100_000),
      templateData: { v: 'x'.repeat(5000) },
    });
    expectHealthUp(await health.stop());
    expect(res.status, JSON.stringify(res.body)).toBe(422);
    expect(res.body).toEqual({
      error: expect.any(String),
      code: expect.stringMatching(/^(parse_(budget|memory)_exceeded|content_too_large)$/),
    });
  });

  it('a large HTML body is rendered and tracked in the pool exactly as a small one inline', async () => {
    const filler = `<p>${'lorem ipsum '.repeat(8000)}</p>`; // about 96 KB: past the 64 KiB inline bound
    const res = await env.send({
      to: 'big-track@rcpt.test',
      html: `<html><body>${filler}<a href="https://example.com/a?b=1">go</a></body></html>`,
      trackClicks: true,
      trackOpens: true,
    });
    expect(res.status).toBe(200);
    const raw = (await env.sink.waitFor((m) => m.to.includes('big-track@rcpt.test'))).raw.toString('utf8');
    const html = (await parseMail(Buffer.from(raw))).html as string;
    expect(html).toMatch(new RegExp(`<img src="[^"]*/t/o/${res.body.id}\\.gif\\?s=[0-9a-f]+"[^>]*></body>`));
    // Signed in the thread, verified on the API loop: the same key, so the redirect answers.
    const click = /href="([^"]+\/t\/c\/[^"]+)"/.exec(html)![1]!.replace(/&amp;/g, '&');
    const redirect = await fetch(`${env.stack.baseUrl}${click.replace(env.stack.config.publicUrl, '')}`, {
      redirect: 'manual',
    });
    expect(redirect.status).toBe(302);
    expect(redirect.headers.get('location')).toBe('https://example.com/a?b=1');
  });
});
