import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Ajv, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import { toJsonSchema } from '../../api/schemas.js';
import { WEBHOOK_PAYLOADS } from '../../core/webhooks/payload-schemas.js';

const ajv = new Ajv({ strict: false, allErrors: true });
(addFormats as unknown as (a: Ajv) => void)(ajv);
const validators = new Map<string, ValidateFunction>();

/** Checks a webhook body against the schema /v1/schemas publishes for its `type`; answers the problem, or undefined. */
export function checkPublishedSchema(json: unknown): string | undefined {
  const type = (json as { type?: unknown } | null)?.type;
  const entry = typeof type === 'string' ? WEBHOOK_PAYLOADS[type as keyof typeof WEBHOOK_PAYLOADS] : undefined;
  if (!entry) return `no published schema for type ${JSON.stringify(type)}`;
  let validate = validators.get(entry.name);
  if (!validate) {
    const { $id: _id, ...schema } = toJsonSchema(
      { name: entry.name, title: entry.name, schema: entry.schema, io: 'output' },
      'http://schemas.test',
    );
    validate = ajv.compile(schema);
    validators.set(entry.name, validate);
  }
  return validate(json) ? undefined : `${type}: ${ajv.errorsText(validate.errors)}`;
}

export type Hit = { path: string; headers: IncomingMessage['headers']; body: string; json: any; verified: boolean };
type Behavior = (hit: Hit, count: number) => { status: number; body?: string; headers?: Record<string, string> };

/** Verifies `x-svc-signature` as DESIGN.md says a receiver should: HMAC-SHA256(secret, "<t>." + body), |now - t| ≤ 5 min. */
export function verifySignature(secret: string, header: string | undefined, body: string, now = Date.now()): boolean {
  const m = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(header ?? '');
  if (!m || Math.abs(now - Number(m[1])) > 5 * 60_000) return false;
  const expected = createHmac('sha256', secret).update(`${m[1]}.${body}`).digest();
  return timingSafeEqual(expected, Buffer.from(m[2]!, 'hex'));
}

/** A real HTTP webhook receiver on loopback: per-path behaviour, signature checked with the registered secret. */
export async function startWebhookReceiver() {
  const hits: Hit[] = [];
  const behaviors = new Map<string, Behavior>();
  const secrets = new Map<string, string>();
  const delays = new Map<string, number>();
  /** Paths whose requests wait for `release` (a receiver that never answers until told to). */
  const held = new Map<string, (() => void)[]>();
  /** Every body the service POSTs must validate against its published schema; close() fails the suite otherwise. */
  const schemaErrors: string[] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      const path = req.url ?? '/';
      let json: unknown = null;
      try {
        json = JSON.parse(body);
      } catch {
        /* not JSON */
      }
      const secret = secrets.get(path);
      const hit: Hit = {
        path,
        headers: req.headers,
        body,
        json,
        verified: secret ? verifySignature(secret, req.headers['x-svc-signature'] as string, body) : false,
      };
      hits.push(hit);
      const problem = checkPublishedSchema(json);
      if (problem) schemaErrors.push(`${path}: ${problem}`);
      const count = hits.filter((h) => h.path === path).length;
      const fallback: Behavior = () => ({ status: 200, body: '{"status":"ok"}' });
      const out = (behaviors.get(path) ?? fallback)(hit, count);
      const answer = () =>
        res.writeHead(out.status, { 'content-type': 'application/json', ...out.headers }).end(out.body ?? '');
      if (held.has(path)) held.get(path)!.push(answer);
      else if (delays.get(path)) setTimeout(answer, delays.get(path));
      else answer();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    base,
    hits,
    schemaErrors,
    on(path: string, b: Behavior) {
      behaviors.set(path, b);
    },
    secret(path: string, s: string) {
      secrets.set(path, s);
    },
    /** Answers requests on `path` only after `ms` (a slow receiver). */
    delay(path: string, ms: number) {
      delays.set(path, ms);
    },
    /** Requests on `path` get no answer until `release(path)` (answered then, unless the client gave up). */
    hold(path: string) {
      if (!held.has(path)) held.set(path, []);
    },
    release(path: string) {
      const waiting = held.get(path) ?? [];
      held.delete(path);
      waiting.forEach((answer) => answer());
    },
    hitsOn: (path: string) => hits.filter((h) => h.path === path),
    async waitFor(path: string, n = 1, timeoutMs = 20_000) {
      const deadline = Date.now() + timeoutMs;
      while (hits.filter((h) => h.path === path).length < n) {
        if (Date.now() > deadline)
          throw new Error(`${path}: ${hits.filter((h) => h.path === path).length}/${n} hits within ${timeoutMs} ms`);
        await new Promise((r) => setTimeout(r, 50));
      }
      return hits.filter((h) => h.path === path);
    },
    async close() {
      await new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      });
      if (schemaErrors.length)
        throw new Error(`webhook bodies that do not match their published schema:\n${schemaErrors.join('\n')}`);
    },
  };
}
