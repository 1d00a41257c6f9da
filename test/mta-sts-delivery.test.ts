import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { SMTPServer } from 'smtp-server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from './helpers/ports.js';
import { startSendingStack, type SendingStack } from './helpers/sending.js';
import { eventually } from './helpers/stack.js';
import { startWorkerProcess, workerEnvOf } from './helpers/worker-process.js';

/**
 * MTA-STS end to end (docs/mta-sts.md): a worker process given a test CA through NODE_EXTRA_CA_CERTS, the
 * policies served over HTTPS on loopback, and MXs that offer no STARTTLS or a certificate for another
 * name. Under `enforce` nothing reaches them, not even MAIL FROM, and the trail says why; under `testing`
 * mail is delivered and the failure noted; a new record id fetches the policy again; a policy over the
 * size bound is refused.
 */
const OPERATOR = 'operator-token-for-mta-sts-0123456789';
const run = promisify(execFile);
const dir = mkdtempSync(join(tmpdir(), 'mta-sts-e2e-'));

async function makeCa() {
  const [key, cert] = [join(dir, 'ca.key'), join(dir, 'ca.crt')];
  await run('openssl', [
    ...['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'],
    ...['-keyout', key, '-out', cert, '-days', '30', '-subj', '/CN=MTA-STS test CA'],
    ...['-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign'],
  ]);
  return { key, cert };
}

/** A certificate for `names`, issued by the test CA. */
async function issue(ca: { key: string; cert: string }, label: string, names: string[]) {
  const [key, csr, cert, ext] = ['key', 'csr', 'crt', 'ext'].map((x) => join(dir, `${label}.${x}`)) as [
    string,
    string,
    string,
    string,
  ];
  writeFileSync(ext, `subjectAltName=${names.map((n) => `DNS:${n}`).join(',')}\n`);
  await run('openssl', [
    ...['req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'],
    ...['-keyout', key, '-out', csr, '-subj', `/CN=${names[0]}`],
  ]);
  await run('openssl', [
    ...['x509', '-req', '-in', csr, '-CA', ca.cert, '-CAkey', ca.key, '-CAcreateserial'],
    ...['-out', cert, '-days', '30', '-extfile', ext],
  ]);
  return { key: readFileSync(key), cert: readFileSync(cert) };
}

type Mx = { server: SMTPServer; mailFrom: string[]; delivered: string[] };
/** A loopback MX on `host`: with STARTTLS and `tls`, or none; records every MAIL FROM and each delivered recipient. */
async function startMx(host: string, port: number, tls?: { key: Buffer; cert: Buffer }): Promise<Mx> {
  const mx: Mx = { mailFrom: [], delivered: [], server: undefined as never };
  mx.server = new SMTPServer({
    authOptional: true,
    disabledCommands: tls ? ['AUTH'] : ['AUTH', 'STARTTLS'],
    ...tls,
    logger: false,
    onMailFrom(address, _session, cb) {
      mx.mailFrom.push(address.address);
      cb();
    },
    onData(stream, session, cb) {
      stream.on('data', () => undefined);
      stream.on('end', () => {
        mx.delivered.push(...session.envelope.rcptTo.map((r) => r.address));
        cb();
      });
    },
  });
  mx.server.on('error', () => undefined);
  await new Promise<void>((resolve) => mx.server.listen(port, host, resolve));
  return mx;
}

let env: SendingStack;
let worker: Awaited<ReturnType<typeof startWorkerProcess>>;
let https: Server;
let plain: Mx;
let wrongName: Mx;
let good: Mx;
const policies = new Map<string, string>();
const hits = new Map<string, number>();
const policy = (mode: string, mx: string) => `version: STSv1\r\nmode: ${mode}\r\nmx: ${mx}\r\nmax_age: 86400\r\n`;

/** Publishes `domain`'s MX (at `address`), its `_mta-sts` record and the policy served for it. */
function publish(domain: string, address: string, id: string, body: string) {
  env.dns.zone.set(domain, 'MX', [{ value: `mx.${domain}`, priority: 10 }]);
  env.dns.zone.set(`mx.${domain}`, 'A', [{ value: address }]);
  env.dns.zone.set(`_mta-sts.${domain}`, 'TXT', [{ value: `v=STSv1; id=${id}` }]);
  env.dns.zone.set(`mta-sts.${domain}`, 'A', [{ value: '127.0.0.1' }]);
  policies.set(`mta-sts.${domain}`, body);
}

const DOMAINS = ['enforce-plain.test', 'enforce-wrong.test', 'enforce-good.test', 'testing.test', 'big.test'];

beforeAll(async () => {
  const ca = await makeCa();
  const site = await issue(
    ca,
    'sites',
    DOMAINS.map((d) => `mta-sts.${d}`),
  );
  const httpsPort = await freePort();
  https = createServer({ ...site }, (req, res) => {
    const host = (req.headers.host ?? '').split(':')[0]!;
    hits.set(host, (hits.get(host) ?? 0) + 1);
    const body = req.url === '/.well-known/mta-sts.txt' ? policies.get(host) : undefined;
    if (body === undefined) return void res.writeHead(404).end();
    res.writeHead(200, { 'content-type': 'text/plain' }).end(body);
  });
  await new Promise<void>((resolve) => https.listen(httpsPort, '127.0.0.1', resolve));

  env = await startSendingStack({
    roles: ['api', 'smtp'],
    env: { OPERATOR_TOKEN: OPERATOR, MTA_STS_PORT: String(httpsPort), MTA_STS_MAX_BYTES: '1024' },
  });
  const port = env.sink.port;
  plain = await startMx('127.0.0.5', port);
  wrongName = await startMx('127.0.0.6', port, await issue(ca, 'wrong', ['mx.somewhere-else.test']));
  good = await startMx('127.0.0.7', port, await issue(ca, 'good', ['mx.enforce-good.test']));
  publish('enforce-plain.test', '127.0.0.5', 'p1', policy('enforce', 'mx.enforce-plain.test'));
  publish('enforce-wrong.test', '127.0.0.6', 'w1', policy('enforce', 'mx.enforce-wrong.test'));
  publish('enforce-good.test', '127.0.0.7', 'g1', policy('enforce', '*.enforce-good.test'));
  publish('testing.test', '127.0.0.5', 't1', policy('testing', 'mx.testing.test'));
  publish('big.test', '127.0.0.5', 'b1', policy('enforce', 'mx.big.test') + `# ${'x'.repeat(4096)}\r\n`);

  const c = env.stack.config;
  worker = await startWorkerProcess(
    workerEnvOf(env.stack, {
      NODE_EXTRA_CA_CERTS: ca.cert,
      ALLOW_PRIVATE_NETWORKS: '1',
      SERVICE_DOMAIN: c.serviceDomain,
      OUTBOUND_MODE: 'mx',
      MX_PORT: String(port),
      DNS_SERVERS: env.dns.server.address,
      OUTBOUND_RETRY_SCHEDULE: '500,500',
      MTA_STS_PORT: String(httpsPort),
      MTA_STS_MAX_BYTES: '1024',
      MTA_STS_CACHE_MS: '300',
    }),
  );
}, 180_000);

afterAll(async () => {
  await worker?.kill();
  await env?.stop();
  for (const mx of [plain, wrongName, good]) await new Promise<void>((r) => (mx ? mx.server.close(() => r()) : r()));
  await new Promise<void>((r) => (https ? https.close(() => r()) : r()));
  rmSync(dir, { recursive: true, force: true });
});

type Detail = {
  message: { status: string; recipients: { address: string; status: string; bounceClass?: string }[] };
  trail: { kind: string; status: string; response: string; tls?: string; source?: string }[];
};
const detail = async (id: string): Promise<Detail> =>
  (await env.stack.api('GET', `/api/messages/${id}`, { token: env.key })).body as Detail;
const sendTo = async (to: string) => {
  const res = await env.send({ to, subject: `to ${to}` });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.id as string;
};
/** Waits until the message's status is one of `states`. */
const settled = (id: string, states: string[]) =>
  eventually(
    async () => {
      const d = await detail(id);
      return states.includes(d.message.status) ? d : undefined;
    },
    60_000,
    200,
  );
const stored = (domain: string) =>
  env.stack.api('GET', `/api/operator/mta-sts/${domain}`, { headers: { authorization: `Bearer ${OPERATOR}` } });

describe('MTA-STS enforce', () => {
  it('never sends to an MX without STARTTLS: no MAIL FROM, the recipient deferred and then bounced tls_required', async () => {
    const id = await sendTo('someone@enforce-plain.test');
    const d = await settled(id, ['bounced', 'failed']);
    expect(plain.mailFrom.filter((f) => f.includes(id))).toEqual([]);
    expect(plain.delivered).not.toContain('someone@enforce-plain.test');
    const smtp = d.trail.filter((t) => t.kind === 'smtp' && t.status !== 'throttled');
    expect(smtp.length).toBeGreaterThan(0);
    for (const t of smtp) expect(t.response).toMatch(/MTA-STS/);
    expect(smtp.map((t) => t.response).join('\n')).toMatch(/STARTTLS/i);
    expect(d.message.recipients[0]).toMatchObject({
      address: 'someone@enforce-plain.test',
      bounceClass: 'tls_required',
    });
    const row = await stored('enforce-plain.test');
    expect(row.status).toBe(200);
    expect(JSON.stringify(row.body)).toMatch(/enforce/);
  });

  it('never sends to an MX whose certificate names another host', async () => {
    const id = await sendTo('someone@enforce-wrong.test');
    const d = await settled(id, ['bounced', 'failed']);
    expect(wrongName.mailFrom).toEqual([]);
    expect(
      d.trail
        .filter((t) => t.kind === 'smtp' && t.status !== 'throttled')
        .map((t) => t.response)
        .join('\n'),
    ).toMatch(/certificate-host-mismatch/);
  });

  it('delivers over verified TLS to an MX the policy names (wildcard)', async () => {
    const id = await sendTo('someone@enforce-good.test');
    const d = await settled(id, ['sent']);
    expect(good.delivered).toContain('someone@enforce-good.test');
    expect(d.message.recipients[0]!.status).toBe('sent');
  });
});

describe('MTA-STS testing, a new record id, a policy too large', () => {
  it('testing delivers in clear and notes the failure on the trail', async () => {
    const id = await sendTo('first@testing.test');
    const d = await settled(id, ['sent']);
    expect(plain.delivered).toContain('first@testing.test');
    const sent = d.trail.find((t) => t.kind === 'smtp' && t.status === 'sent');
    expect(sent?.tls).toMatch(/MTA-STS testing/);
  });

  it('a changed record id fetches the policy again, and the new policy (enforce) applies once stored', async () => {
    const before = hits.get('mta-sts.testing.test') ?? 0;
    expect(before).toBeGreaterThan(0);
    publish('testing.test', '127.0.0.5', 't2', policy('enforce', 'mx.testing.test'));
    // The old policy is kept while the new one is fetched (RFC 8461 §5.1), and a fetch starts only when mail
    // for the domain sees the new id: mail goes on (either way) until the new policy is stored.
    let n = 0;
    await eventually(async () => {
      await settled(await sendTo(`probe-${n++}@testing.test`), ['sent', 'bounced', 'failed']);
      const row = JSON.stringify((await stored('testing.test')).body);
      return (hits.get('mta-sts.testing.test') ?? 0) > before && row.includes('t2') ? true : undefined;
    }, 45_000);
    const id = await sendTo('third@testing.test');
    const d = await settled(id, ['bounced', 'failed']);
    expect(plain.delivered).not.toContain('third@testing.test');
    expect(d.message.recipients[0]!.bounceClass).toBe('tls_required');
  });

  it('a policy over MTA_STS_MAX_BYTES is refused and recorded; the mail goes as without a policy', async () => {
    const id = await sendTo('someone@big.test');
    await settled(id, ['sent']);
    expect(plain.delivered).toContain('someone@big.test');
    const row = await stored('big.test');
    expect(row.status).toBe(200);
    expect(JSON.stringify(row.body)).toMatch(/failed/);
  });
});
