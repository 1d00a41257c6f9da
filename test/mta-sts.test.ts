import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { refreshPolicy, type RefreshDeps } from '../core/mta-sts/refresh.js';
import { createPolicyStore } from '../core/mta-sts/store.js';
import { resolverFor, startTestDns } from './helpers/dns.js';
import { eventually, startStack, type TestStack } from './helpers/stack.js';
import { startWorkerProcess, workerEnvOf } from './helpers/worker-process.js';

const OPERATOR = 'operator-token-for-mta-sts-tests';
const run = promisify(execFile);
const NAMES = ['enforce', 'testing', 'none', 'big', 'redirect', 'html', 'rot', 'private'].map((d) => `${d}.test`);

/** A test CA, and a certificate it signed for the `mta-sts.` host of every test domain but `wrongname.test`. */
async function testCertificates(dir: string) {
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  const f = (n: string) => join(dir, n);
  await run('openssl', [
    ...[
      'req',
      '-x509',
      ...ec,
      '-keyout',
      f('ca.key'),
      '-out',
      f('ca.crt'),
      '-days',
      '30',
      '-subj',
      '/CN=MTA-STS Test CA',
    ],
    ...['-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign'],
  ]);
  await run('openssl', ['req', ...ec, '-keyout', f('leaf.key'), '-out', f('leaf.csr'), '-subj', '/CN=mta-sts.test']);
  writeFileSync(f('ext.cnf'), `subjectAltName=${NAMES.map((d) => `DNS:mta-sts.${d}`).join(',')}\n`);
  await run('openssl', [
    ...['x509', '-req', '-in', f('leaf.csr'), '-CA', f('ca.crt'), '-CAkey', f('ca.key'), '-CAcreateserial'],
    ...['-out', f('leaf.crt'), '-days', '30', '-extfile', f('ext.cnf')],
  ]);
  return { ca: readFileSync(f('ca.crt')), key: readFileSync(f('leaf.key')), cert: readFileSync(f('leaf.crt')) };
}

const policyText = (mode: string, mx: string[], maxAge = 86400) =>
  ['version: STSv1', `mode: ${mode}`, ...mx.map((m) => `mx: ${m}`), `max_age: ${maxAge}`, ''].join('\r\n');

let dir: string;
let certs: Awaited<ReturnType<typeof testCertificates>>;
let dns: Awaited<ReturnType<typeof startTestDns>>;
let https: Server;
let httpsPort: number;
let stack: TestStack;
let worker: Awaited<ReturnType<typeof startWorkerProcess>>;
/** What the policy host serves, by host name (the `rot.test` policy changes during a test). */
const served = new Map<string, string>([
  ['mta-sts.enforce.test', policyText('enforce', ['mx.enforce.test', '*.mail.enforce.test'])],
  ['mta-sts.testing.test', policyText('testing', ['mx.testing.test'], 3600)],
  ['mta-sts.none.test', policyText('none', [])],
  ['mta-sts.wrongname.test', policyText('enforce', ['mx.wrongname.test'])],
  ['mta-sts.private.test', policyText('enforce', ['mx.private.test'])],
  ['mta-sts.rot.test', policyText('enforce', ['mx.rot.test'])],
]);
/** The oversized policy: how much of it went out, and whether the response ever finished. */
const big = { total: 8 * 1024 * 1024, sent: 0, finished: false, closed: false };

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'mta-sts-'));
  certs = await testCertificates(dir);
  dns = await startTestDns();
  https = createServer({ key: certs.key, cert: certs.cert }, (req, res) => {
    const host = (req.headers.host ?? '').split(':')[0]!;
    if (req.url !== '/.well-known/mta-sts.txt') return void res.writeHead(404).end();
    if (host === 'mta-sts.redirect.test')
      return void res.writeHead(302, { location: 'https://mta-sts.enforce.test/.well-known/mta-sts.txt' }).end();
    if (host === 'mta-sts.html.test')
      return void res.writeHead(200, { 'content-type': 'text/html' }).end(policyText('enforce', ['a.test']));
    if (host === 'mta-sts.big.test') {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.on('close', () => (big.closed = true));
      const chunk = Buffer.alloc(16 * 1024, 'a');
      const pump = () => {
        while (big.sent < big.total && !res.destroyed) {
          big.sent += chunk.length;
          if (!res.write(chunk)) return void res.once('drain', pump);
        }
        if (!res.destroyed) res.end(() => (big.finished = true));
      };
      return pump();
    }
    const body = served.get(host);
    if (!body) return void res.writeHead(404).end();
    res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' }).end(body);
  });
  await new Promise<void>((resolve) => https.listen(0, '127.0.0.1', resolve));
  httpsPort = (https.address() as { port: number }).port;
  for (const d of [...NAMES, 'wrongname.test']) {
    dns.zone.set(`_mta-sts.${d}`, 'TXT', [{ value: `v=STSv1; id=${d.split('.')[0]}1;` }]);
    dns.zone.set(`mta-sts.${d}`, 'A', [{ value: '127.0.0.1' }]);
  }

  const env = {
    DNS_SERVERS: dns.server.address,
    MTA_STS_PORT: String(httpsPort),
    MTA_STS_TIMEOUT_MS: '5000',
    ALLOW_PRIVATE_NETWORKS: '1',
    OPERATOR_TOKEN: OPERATOR,
  };
  stack = await startStack(env, ['api']);
  // The worker runs in its own process: the test CA reaches it as it would a deployment, through NODE_EXTRA_CA_CERTS.
  worker = await startWorkerProcess(workerEnvOf(stack, { ...env, NODE_EXTRA_CA_CERTS: join(dir, 'ca.crt') }));
}, 120_000);

afterAll(async () => {
  await worker?.kill();
  await stack?.stop();
  await dns?.close();
  await new Promise<void>((r) => (https ? https.close(() => r()) : r()));
  rmSync(dir, { recursive: true, force: true });
});

/** The refresh the fetch workflow's activity runs, in this process, trusting the test CA. */
function deps(over: Partial<RefreshDeps['fetch']> = {}): RefreshDeps {
  const resolver = resolverFor(dns.server.address);
  return {
    store: createPolicyStore(stack.service.core.db),
    resolver,
    retryMs: 600_000,
    fetch: { resolver, allowPrivate: true, port: httpsPort, maxBytes: 65536, timeoutMs: 5000, ca: certs.ca, ...over },
  };
}

describe('MTA-STS policy fetch', () => {
  it('reads and stores enforce, testing and none policies until max_age', async () => {
    const store = createPolicyStore(stack.service.core.db);
    const before = Date.now();
    expect(await refreshPolicy('enforce.test', deps())).toMatchObject({ status: 'ok', recordId: 'enforce1' });
    expect(await refreshPolicy('TESTING.test.', deps())).toMatchObject({ status: 'ok', mode: 'testing' });
    expect(await refreshPolicy('none.test', deps())).toMatchObject({ status: 'ok', mode: 'none' });
    const enforce = (await store.get('enforce.test'))!;
    expect(enforce).toMatchObject({
      recordId: 'enforce1',
      status: 'ok',
      mode: 'enforce',
      mx: ['mx.enforce.test', '*.mail.enforce.test'],
      maxAge: 86400,
      error: null,
    });
    expect(enforce.expiresAt - enforce.fetchedAt).toBe(86400 * 1000);
    expect(enforce.fetchedAt).toBeGreaterThanOrEqual(before);
    expect((await store.get('testing.test'))!).toMatchObject({ mode: 'testing', maxAge: 3600 });
    expect((await store.get('none.test'))!).toMatchObject({ mode: 'none', mx: [] });
  });

  it('refuses a policy over the size bound, cutting the connection rather than reading it all', async () => {
    const r = await refreshPolicy('big.test', deps({ maxBytes: 4096 }));
    expect(r).toMatchObject({ status: 'failed', recordId: 'big1' });
    expect(r.error).toContain('over the 4096-byte bound');
    await eventually(async () => big.closed);
    expect(big.finished).toBe(false);
    expect(big.sent).toBeLessThan(big.total);
    const row = (await createPolicyStore(stack.service.core.db).get('big.test'))!;
    expect(row).toMatchObject({ status: 'failed', mode: null });
    expect(row.expiresAt - row.fetchedAt).toBe(600_000);
  });

  it('follows no redirect, takes text/plain only, and verifies the certificate for the host name', async () => {
    expect((await refreshPolicy('redirect.test', deps())).error).toContain('HTTP 302: redirects are not followed');
    expect((await refreshPolicy('html.test', deps())).error).toContain('Content-Type "text/html"');
    const wrong = await refreshPolicy('wrongname.test', deps());
    expect(wrong).toMatchObject({ status: 'failed' });
    expect(wrong.error).toMatch(/certificate|altnames/i);
    // Without the test CA (Node's roots only, and this process was not given NODE_EXTRA_CA_CERTS): refused.
    const untrusted = await refreshPolicy('enforce.test', { ...deps({ ca: undefined }), store: freshStore() });
    expect(untrusted.status).toBe('failed');
    expect(untrusted.error).toMatch(/certificate/i);
  });

  it('refuses a policy host that resolves to a private address when private networks are not allowed', async () => {
    const r = await refreshPolicy('private.test', deps({ allowPrivate: false }));
    expect(r).toMatchObject({ status: 'failed', recordId: 'private1' });
    expect(r.error).toContain('internal address');
  });

  it('records absent when there is no record, and keeps a live policy when the record vanishes', async () => {
    dns.zone.remove('_mta-sts.none.test', 'TXT');
    dns.zone.set('_mta-sts.gone.test', 'TXT', [{ value: 'v=spf1 -all' }]);
    expect(await refreshPolicy('gone.test', deps())).toMatchObject({ status: 'absent', error: 'no v=STSv1 record' });
    expect(await refreshPolicy('none.test', deps())).toMatchObject({ status: 'kept', mode: 'none' });
  });
});

/** A store whose writes go nowhere useful: a domain no test reads, so the shared rows stay as they are. */
function freshStore() {
  const store = createPolicyStore(stack.service.core.db);
  return { ...store, get: async () => undefined, put: async () => undefined };
}

describe('MTA-STS lookup and workflow', () => {
  it('fetches through the workflow, answers pending meanwhile, and fetches again when the id changes', async () => {
    const lookup = stack.service.core.mtaSts.lookup({ cacheMs: 0 });
    const store = createPolicyStore(stack.service.core.db);
    const first = await lookup.policyFor('rot.test');
    expect(first).toEqual({ pending: true, waitMs: 2000, cause: 'MTA-STS policy of rot.test being fetched' });
    const stored = await eventually(async () => {
      const a = await lookup.policyFor('rot.test');
      return 'policy' in a && a.policy ? a.policy : undefined;
    }, 30_000);
    expect(stored).toEqual({ id: 'rot1', mode: 'enforce', mx: ['mx.rot.test'], maxAge: 86400 });

    // The record's id changes with the policy: the old policy answers while the workflow fetches the new one.
    served.set('mta-sts.rot.test', policyText('testing', ['mx2.rot.test'], 7200));
    dns.zone.set('_mta-sts.rot.test', 'TXT', [{ value: 'v=STSv1; id=rot2' }]);
    const during = await lookup.policyFor('rot.test');
    expect('policy' in during && during.policy?.id).toBe('rot1');
    await eventually(async () => (await store.get('rot.test'))?.recordId === 'rot2', 30_000);
    expect(await store.get('rot.test')).toMatchObject({ status: 'ok', mode: 'testing', mx: ['mx2.rot.test'] });
    expect(await lookup.policyFor('rot.test')).toEqual({
      policy: { id: 'rot2', mode: 'testing', mx: ['mx2.rot.test'], maxAge: 7200 },
    });
  });

  it('answers no policy without a record, for mode none, and for a failed fetch', async () => {
    const lookup = stack.service.core.mtaSts.lookup({ cacheMs: 0 });
    expect(await lookup.policyFor('nothing-published.test')).toEqual({ policy: null });
    expect(await lookup.policyFor('not a domain')).toEqual({ policy: null });
    // none.test's record was removed above; its stored mode none stays in force and applies nothing.
    expect(await lookup.policyFor('none.test')).toEqual({ policy: null });
    expect(await lookup.policyFor('big.test')).toEqual({ policy: null });
  });

  it("lets the operator see and flush a domain's stored policy", async () => {
    const auth = { token: OPERATOR };
    expect((await stack.api('GET', '/api/operator/mta-sts/enforce.test')).status).toBe(401);
    expect((await stack.api('POST', '/api/operator/mta-sts/enforce.test/flush')).status).toBe(401);
    expect((await stack.api('GET', '/api/operator/mta-sts/enforce.test', { token: 'wrong' })).status).toBe(401);
    const shown = await stack.api('GET', '/api/operator/mta-sts/Enforce.test', auth);
    expect(shown.status).toBe(200);
    expect(shown.body).toMatchObject({
      domain: 'enforce.test',
      record_id: 'enforce1',
      status: 'ok',
      mode: 'enforce',
      mx: ['mx.enforce.test', '*.mail.enforce.test'],
      max_age: 86400,
      error: null,
    });
    expect(Date.parse(shown.body.expires_at) - Date.parse(shown.body.fetched_at)).toBe(86400 * 1000);
    const flushed = await stack.api('POST', '/api/operator/mta-sts/enforce.test/flush', auth);
    expect(flushed).toMatchObject({ status: 200, body: { flushed: true } });
    const after = await stack.api('GET', '/api/operator/mta-sts/enforce.test', auth);
    expect(after.status).toBe(404);
    expect(after.body.code).toBe('not_found');
    expect((await stack.api('POST', '/api/operator/mta-sts/enforce.test/flush', auth)).body).toEqual({
      flushed: false,
    });
    expect((await stack.api('GET', '/api/operator/mta-sts/bad_domain!', auth)).status).toBe(400);
  });
});
