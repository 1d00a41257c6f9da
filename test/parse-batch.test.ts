import { fileURLToPath } from 'node:url';
import { Piscina } from 'piscina';
import { afterAll, describe, expect, it } from 'vitest';
import { AppError } from '../core/errors.js';
import { createBatcher } from '../core/parsing/batch.js';
import { createParsePool } from '../core/parsing/pool.js';
import type { WorkerAnswer } from '../core/parsing/worker.js';

const mail = (i: number) =>
  Buffer.from(
    `From: s${i}@far.example\r\nSubject: batch ${i}\r\nContent-Type: multipart/alternative; boundary=b\r\n\r\n` +
      `--b\r\nContent-Type: text/plain\r\n\r\nHello ${i}\r\n--b\r\nContent-Type: text/html\r\n\r\n<p>Hello <b>${i}</b></p>\r\n--b--\r\n`,
  );
/** Multipart nested 1,000 deep: small, and refused by mailparser. */
const nested = () => {
  let body = 'x';
  for (let i = 0; i < 1000; i++)
    body = `Content-Type: multipart/mixed; boundary=b${i}\r\n\r\n--b${i}\r\n${body}\r\n--b${i}--\r\n`;
  return Buffer.from(`Subject: deep\r\n${body}`);
};

describe('small mail parsed in batches', () => {
  const pool = createParsePool({ threads: 2, timeoutMs: 10_000, memoryMb: 256 });
  afterAll(() => pool.close());

  it('mail handed in together is answered each with its own parse, and one refusal stays its own', async () => {
    const raws = [...Array.from({ length: 20 }, (_, i) => mail(i)), nested()];
    const answers = await Promise.allSettled(raws.map((raw) => pool.run('parseMail', raw)));
    for (let i = 0; i < 20; i++) {
      const a = answers[i]!;
      expect(a.status).toBe('fulfilled');
      const parsed = (a as PromiseFulfilledResult<Awaited<ReturnType<typeof pool.run<'parseMail'>>>>).value;
      expect([parsed.subject, parsed.text?.trim(), parsed.html]).toEqual([
        `batch ${i}`,
        `Hello ${i}`,
        `<p>Hello <b>${i}</b></p>`,
      ]);
    }
    expect(answers[20]).toMatchObject({ status: 'rejected', reason: { code: 'unparseable_message' } });
  });
});

describe('the batcher against a real thread', () => {
  const piscina = new Piscina({
    filename: fileURLToPath(new URL('./fixtures/parse-batch/spin-worker.mjs', import.meta.url)),
    minThreads: 1,
    maxThreads: 1,
  });
  afterAll(() => piscina.close({ force: true }));
  const refused: string[] = [];
  let alone = 0;
  const batcher = createBatcher({
    piscina,
    async alone(task, input, budget) {
      alone += 1;
      const answer = piscina.run(
        { task, input, handedAt: Date.now(), started: new Int32Array(new SharedArrayBuffer(4)) },
        { signal: AbortSignal.timeout(budget) },
      );
      return answer as Promise<WorkerAnswer>;
    },
    overBudget: (task, ms) => new AppError(422, 'parse_budget_exceeded', `${task} over ${ms} ms`, false),
    busy: (task, ms) => new AppError(503, 'parse_busy', `${task} waited ${ms} ms`, true),
    counted: (task) => refused.push(task),
  });

  it('a task past its budget is refused alone: the ones before and after it in its batch are answered', async () => {
    const inputs = [
      { ms: 0, value: 'a' },
      { ms: 50, value: 'b' },
      { ms: Infinity, value: 'never' },
      { ms: 0, value: 'c' },
      { ms: 0, value: 'd' },
    ];
    const answers = await Promise.allSettled(inputs.map((input) => batcher.add('spin', input, 500, 30_000)));
    expect(
      answers.map((a) =>
        a.status === 'fulfilled' ? (a.value as { value: string }).value : (a.reason as AppError).code,
      ),
    ).toEqual(['a', 'b', 'parse_budget_exceeded', 'c', 'd']);
    expect(refused).toEqual(['spin']);
    // The four whose answers went with the ended thread ran again, alone.
    expect(alone).toBe(4);
  });

  it('each task of a batch has its own budget from its own start: slow tasks one after the other are not refused', async () => {
    alone = 0;
    const inputs = [300, 300, 300].map((ms, i) => ({ ms, value: `slow ${i}` }));
    const answers = await Promise.all(inputs.map((input) => batcher.add('spin', input, 500, 30_000)));
    expect(answers.map((a) => (a as { value: string }).value)).toEqual(['slow 0', 'slow 1', 'slow 2']);
    expect(alone).toBe(0);
  });
});
