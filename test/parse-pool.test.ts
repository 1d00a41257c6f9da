import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AppError } from '../core/errors.js';
import { parseTasksOverBudget } from '../core/metrics.js';
import { createParsePool, openParsePool, parseMail, runParse, type ParsePool } from '../core/parsing/pool.js';

/** A 20 MB HTML-only message: mailparser's HTML-to-text takes seconds on it (about 11 s measured), linear but long. */
const slowMail = () => Buffer.from(`Subject: slow\r\nContent-Type: text/html\r\n\r\n${'<p>hello world</p>\r\n'.repeat(1_000_000)}`);
const small = Buffer.from('From: Ann <ann@x.test>\r\nSubject: hi\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nhello\r\n--b\r\n'
  + 'Content-Type: application/octet-stream; name=a.bin\r\nContent-Transfer-Encoding: base64\r\n\r\nAAEC\r\n--b--\r\n');
const overBudget = async (task: string) => (await parseTasksOverBudget.get()).values.find((v) => v.labels.task === task && v.labels.budget === 'time')?.value ?? 0;

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
    const before = await overBudget('mailSubject');
    const started = performance.now();
    const err = await pool.run('mailSubject', slowMail(), { timeoutMs: 300 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AppError);
    expect(err).toMatchObject({ status: 422, code: 'parse_budget_exceeded', retryable: false });
    expect((err as AppError).message).toContain('300 ms');
    expect(performance.now() - started).toBeLessThan(2_000);
    expect(await overBudget('mailSubject')).toBe(before + 1);
    // One thread only: had the over-budget parse kept its thread, this task would wait the seconds it still needed.
    const next = performance.now();
    expect(await pool.run('mailSubject', small)).toBe('hi');
    expect(performance.now() - next).toBeLessThan(3_000);
  });

  it('the event loop keeps answering while a thread parses for a long time', async () => {
    const { result, worstMs, ticks } = await worstTimerLag(pool.run('mailSubject', slowMail()));
    expect(result).toBe('slow');
    // The same parse on this loop would hold every timer for the whole parse (about a second, measured).
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

