import type { AddressInfo } from 'node:net';
import express from 'express';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineOperation } from '../api/contract.js';
import { errorHandler } from '../api/errors.js';
import { OutputMismatchError, outputOf, undeclaredPaths } from '../api/output.js';
import { mountRest } from '../api/rest.js';
import type { Core } from '../core/index.js';

/**
 * Answers go through the output schema in every mode (api/output.ts): production strips a field the
 * schema does not declare, and outside production the same answer fails the call, so a route that would
 * leak one is found by any test that calls it. Served over real HTTP by the REST mount the app uses.
 */
const leaky = defineOperation({
  name: 'test.leaky',
  method: 'GET',
  path: '/leaky',
  auth: 'public',
  summary: 'answers one field more than it declares',
  output: z.object({ id: z.string(), items: z.array(z.object({ name: z.string() })) }),
  handler: async () => ({
    id: 'dom_1',
    privateKey: '-----BEGIN PRIVATE KEY-----',
    items: [{ name: 'a', secret: 'whsec_x' }],
  }),
});
const wrong = defineOperation({
  name: 'test.wrong',
  method: 'GET',
  path: '/wrong',
  auth: 'public',
  summary: 'answers a type its schema refuses',
  output: z.object({ id: z.string() }),
  handler: async () => ({ id: 42 }) as never,
});

async function serve(strictOutput: boolean) {
  const app = express();
  mountRest(app, [leaky, wrong], {} as Core, { strictOutput });
  app.use(errorHandler);
  const server = app.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const get = async (path: string) => {
    const res = await fetch(base + path);
    return { status: res.status, text: await res.text() };
  };
  return { get, close: () => new Promise((r) => server.close(r)) };
}

let production: Awaited<ReturnType<typeof serve>>;
let test: Awaited<ReturnType<typeof serve>>;
beforeAll(async () => {
  production = await serve(false);
  test = await serve(true);
});
afterAll(async () => {
  await production?.close();
  await test?.close();
});

describe('output schemas in every mode', () => {
  it('production strips undeclared fields, nested ones included: no secret reaches the client', async () => {
    const res = await production.get('/leaky');
    expect(res.status).toBe(200);
    expect(JSON.parse(res.text)).toEqual({ id: 'dom_1', items: [{ name: 'a' }] });
    expect(res.text).not.toContain('PRIVATE KEY');
    expect(res.text).not.toContain('whsec_');
  });

  it('outside production an undeclared field fails the call with a 500 that names nothing of it', async () => {
    const res = await test.get('/leaky');
    expect(res.status).toBe(500);
    expect(JSON.parse(res.text)).toEqual({ error: 'Internal server error', code: 'internal_error' });
    expect(res.text).not.toContain('PRIVATE KEY');
  });

  it('an answer of the wrong type is a 500 in both modes, never a caller validation error', async () => {
    for (const mode of [production, test]) {
      const res = await mode.get('/wrong');
      expect(res.status).toBe(500);
      expect(JSON.parse(res.text).code).toBe('internal_error');
    }
  });

  it('names the path of each undeclared field and ignores undefined ones', () => {
    const raw = { a: 1, gone: undefined, list: [{ x: 1, extra: true }], nested: { keep: 'k', drop: 'd' } };
    const schema = z.object({
      a: z.number(),
      list: z.array(z.object({ x: z.number() })),
      nested: z.object({ keep: z.string() }),
    });
    expect(undeclaredPaths(raw, schema.parse(raw))).toEqual(['list[0].extra', 'nested.drop']);
    expect(() => outputOf(schema, raw, { strict: true, operation: 'x.y' })).toThrow(OutputMismatchError);
    expect(outputOf(schema, raw, { strict: false, operation: 'x.y' })).toEqual({
      a: 1,
      list: [{ x: 1 }],
      nested: { keep: 'k' },
    });
    // Records keep their keys: nothing is undeclared in them.
    const rec = z.object({ payload: z.record(z.string(), z.unknown()) });
    expect(outputOf(rec, { payload: { any: 1 } }, { strict: true, operation: 'x.y' })).toEqual({ payload: { any: 1 } });
  });
});
