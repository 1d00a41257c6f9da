import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { gunzipSync } from 'node:zlib';
import { Ajv } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { and, eq } from 'drizzle-orm';
import { dkimVerify } from 'mailauth/lib/dkim/verify.js';
import { simpleParser } from 'mailparser';
import { SMTPServer } from 'smtp-server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTlsOutcomeRecorder } from '../core/shaping/tls-outcomes.js';
import { mxTransport } from '../core/transport/transport.js';
import { schema as db } from '../db/index.js';
import { resolverFor } from './helpers/dns.js';
import { SERVICE, startSendingStack, type SendingStack } from './helpers/sending.js';
import { eventually } from './helpers/stack.js';

const OPERATOR = 'operator-token-for-tls-reports-0123456789';
const reportSchema = JSON.parse(readFileSync(new URL('./fixtures/rfc8460.schema.json', import.meta.url), 'utf8'));
const ajv = new Ajv({ allErrors: true, strict: false });
(addFormatsModule as unknown as { default: (a: Ajv) => void }).default(ajv);
const validate = ajv.compile(reportSchema);

/**
 * A self-signed certificate for `host`, valid for 30 days: the STARTTLS MX's. The stack's worker trusts it
 * (OUTBOUND_TLS_CA_FILE), so its sessions are a success; a transport without it judges it not trusted.
 */
async function selfSigned(dir: string, host: string) {
  const [key, cert] = [join(dir, 'mx.key'), join(dir, 'mx.crt')];
  const args = ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  await promisify(execFile)('openssl', [
    ...args,
    ...['-keyout', key, '-out', cert, '-days', '30', '-subj', `/CN=${host}`, '-addext', `subjectAltName=DNS:${host}`],
  ]);
  return { key: readFileSync(key), cert: readFileSync(cert) };
}

type Mx = { server: SMTPServer; sessions: number; received: Buffer[] };
/** A loopback MX at `host` on the port every MX of the stack uses (MX_PORT); STARTTLS with `tls`, or none. */
async function startMx(host: string, port: number, tls?: { key: Buffer; cert: Buffer }): Promise<Mx> {
  const mx: Mx = { sessions: 0, received: [], server: undefined as never };
  mx.server = new SMTPServer({
    authOptional: true,
    disabledCommands: tls ? ['AUTH'] : ['AUTH', 'STARTTLS'],
    ...tls,
    logger: false,
    onConnect(_session, cb) {
      mx.sessions += 1;
      cb();
    },
    onData(stream, _session, cb) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        mx.received.push(Buffer.concat(chunks));
        cb();
      });
    },
  });
  mx.server.on('error', () => undefined);
  await new Promise<void>((resolve) => mx.server.listen(port, host, resolve));
  return mx;
}

let env: SendingStack;
let secure: Mx;
let plain: Mx;
let reports: Mx;
let http: Server;
const certDir = mkdtempSync(join(tmpdir(), 'tlsrpt-mx-'));
const posted: { type: string | undefined; body: Buffer }[] = [];

beforeAll(async () => {
  const certificate = await selfSigned(certDir, 'mx.secure.test');
  env = await startSendingStack({
    env: { OPERATOR_TOKEN: OPERATOR, OUTBOUND_TLS_CA_FILE: join(certDir, 'mx.crt') },
  });
  // Loopback addresses of their own, on the one MX port: 127.0.0.1 is the helper's sink.
  secure = await startMx('127.0.0.2', env.sink.port, certificate);
  plain = await startMx('127.0.0.3', env.sink.port);
  reports = await startMx('127.0.0.4', env.sink.port);
  http = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      posted.push({ type: req.headers['content-type'], body: Buffer.concat(chunks) });
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  const httpPort = (http.address() as { port: number }).port;
  const zone = env.dns.zone;
  for (const [domain, ip] of [
    ['secure.test', '127.0.0.2'],
    ['plain.test', '127.0.0.3'],
    ['reports.test', '127.0.0.4'],
  ] as const) {
    zone.set(domain, 'MX', [{ value: `mx.${domain}`, priority: 10 }]);
    zone.set(`mx.${domain}`, 'A', [{ value: ip }]);
  }
  // RFC 8460 §3: rua takes https; a loopback receiver is plain http (allowed for loopback, as for webhooks).
  zone.set('_smtp._tls.secure.test', 'TXT', [
    { value: `v=TLSRPTv1; rua=mailto:tlsrpt@reports.test,http://127.0.0.1:${httpPort}/tlsrpt` },
  ]);
  zone.set('_smtp._tls.plain.test', 'TXT', [{ value: 'v=TLSRPTv1; rua=mailto:tlsrpt@reports.test' }]);
});
afterAll(async () => {
  await env?.stop();
  for (const mx of [secure, plain, reports]) await new Promise<void>((r) => (mx ? mx.server.close(() => r()) : r()));
  await new Promise<void>((r) => (http ? http.close(() => r()) : r()));
  rmSync(certDir, { recursive: true, force: true });
});

const sendNow = () => env.stack.api('POST', '/api/operator/tls-reports/send', { token: OPERATOR });
type Report = {
  'report-id': string;
  policies: {
    policy: { 'policy-type': string; 'policy-domain': string; 'mx-host': string[] };
    summary: { 'total-successful-session-count': number; 'total-failure-session-count': number };
    'failure-details': { 'result-type': string; 'receiving-ip'?: string; 'failed-session-count': number }[];
  }[];
};

/** The report inside one report mail: its headers, the gunzipped JSON, and the DKIM verdict against the service's DNS. */
async function openReportMail(raw: Buffer) {
  const mail = await simpleParser(raw);
  const part = mail.attachments.find((a) => a.contentType === 'application/tlsrpt+gzip');
  expect(part, 'the report is attached as application/tlsrpt+gzip').toBeDefined();
  const r = resolverFor(`127.0.0.1:${env.dnsPort}`);
  const verdict = await dkimVerify(raw, { resolver: ((n: string, t: string) => r.resolve(n, t)) as never });
  return {
    mail,
    filename: part!.filename,
    report: JSON.parse(gunzipSync(part!.content).toString('utf8')) as Report,
    dkim: verdict.results[0] as { status: { result: string }; signingDomain: string },
  };
}

describe('TLS reports the platform sends (RFC 8460)', () => {
  it('counts each MX session, sends each domain its report once, by mail (DKIM-signed) and by POST', async () => {
    for (const to of ['a@secure.test', 'b@secure.test', 'c@plain.test', 'd@plain.test', 'e@plain.test'])
      expect((await env.send({ to, subject: `for ${to}` })).status).toBe(200);
    await eventually(async () => secure.received.length === 2 && plain.received.length === 3, 30_000);
    // Only the operator's credential starts a run.
    expect((await env.stack.api('POST', '/api/operator/tls-reports/send', { token: env.session })).status).toBe(401);

    const first = await sendNow();
    expect(first.status).toBe(200);
    const period = Math.floor(Date.now() / 86_400_000) * 86_400_000;
    const byDomain = new Map<string, { status: string; destinations: string[]; period_start: number }>(
      first.body.reports.map((r: { policy_domain: string }) => [r.policy_domain, r]),
    );
    expect(byDomain.get('secure.test')).toMatchObject({ status: 'sent', period_start: period });
    expect(byDomain.get('secure.test')!.destinations).toHaveLength(2);
    expect(byDomain.get('plain.test')).toMatchObject({
      status: 'sent',
      period_start: period,
      destinations: ['mailto:tlsrpt@reports.test'],
    });

    await eventually(async () => reports.received.length >= 2 && posted.length >= 1, 30_000);
    const mails = await Promise.all(reports.received.map(openReportMail));
    const posts = posted.map((p) => ({ type: p.type, report: JSON.parse(gunzipSync(p.body).toString()) as Report }));
    for (const r of [...mails.map((m) => m.report), ...posts.map((p) => p.report)])
      expect(validate(r), JSON.stringify(validate.errors)).toBe(true);
    expect(posts[0]!.type).toBe('application/tlsrpt+gzip');

    const mailFor = (domain: string) => mails.find((m) => m.report.policies[0]!.policy['policy-domain'] === domain)!;
    // The domain whose MX offers no STARTTLS: every session it took failed, as starttls-not-supported.
    const p = mailFor('plain.test');
    expect(p.report.policies[0]!.summary).toEqual({
      'total-successful-session-count': 0,
      'total-failure-session-count': plain.sessions,
    });
    expect(p.report.policies[0]!['failure-details']).toEqual([
      expect.objectContaining({
        'result-type': 'starttls-not-supported',
        'receiving-mx-hostname': 'mx.plain.test',
        'receiving-ip': '127.0.0.3',
        'failed-session-count': plain.sessions,
      }),
    ]);
    // The STARTTLS MX presents a certificate for its name that the worker trusts: every session a success.
    const s = mailFor('secure.test');
    expect(s.report.policies[0]!.summary).toEqual({
      'total-successful-session-count': secure.sessions,
      'total-failure-session-count': 0,
    });
    expect(secure.sessions).toBeGreaterThan(0);
    expect(s.report.policies[0]!['failure-details'] ?? []).toEqual([]);
    expect(posts[0]!.report).toEqual(s.report);
    expect(s.report['report-id']).toBe(
      `${new Date(period).toISOString().replace('.000Z', 'Z')}_secure.test@${SERVICE}`,
    );
    for (const m of [p, s]) {
      expect(m.dkim).toMatchObject({ status: { result: 'pass' }, signingDomain: SERVICE });
      const domain = m.report.policies[0]!.policy['policy-domain'];
      expect(m.mail.headers.get('tls-report-domain')).toBe(domain);
      expect(m.mail.headers.get('tls-report-submitter')).toBe(SERVICE);
      expect(m.mail.subject).toBe(
        `Report Domain: ${domain} Submitter: ${SERVICE} Report-ID: <${m.report['report-id']}>`,
      );
      expect(m.mail.headers.get('content-type')).toMatchObject({
        value: 'multipart/report',
        params: { 'report-type': 'tlsrpt' },
      });
      // submitter!policy-domain!begin!end.json.gz (RFC 8460 §5.3), the times in seconds.
      const [submitter, named, begin, end] = m.filename!.replace(/\.json\.gz$/, '').split('!');
      expect([submitter, named, Number(begin), Number(end)]).toEqual([
        SERVICE,
        domain,
        period / 1000,
        period / 1000 + 86_399,
      ]);
    }
    const rows = await env.stack.service.core.db
      .select()
      .from(db.tlsReportSends)
      .where(and(eq(db.tlsReportSends.policyDomain, 'plain.test'), eq(db.tlsReportSends.periodStart, period)));
    expect(rows).toMatchObject([{ status: 'sent', destinations: ['mailto:tlsrpt@reports.test'] }]);

    // Once per period: a second run sends neither domain anything again (the reports' own sessions to
    // reports.test are owed one, but that domain publishes no rua).
    const second = await sendNow();
    expect(second.status).toBe(200);
    expect(second.body.reports.map((r: { policy_domain: string }) => r.policy_domain)).not.toContain('plain.test');
    expect(second.body.reports.map((r: { policy_domain: string }) => r.policy_domain)).not.toContain('secure.test');
    expect(second.body.reports).toEqual(
      second.body.reports.map(() => expect.objectContaining({ policy_domain: 'reports.test', status: 'no_rua' })),
    );
    expect(reports.received).toHaveLength(2);
    expect(posted).toHaveLength(1);

    const metrics = await env.stack.api('GET', '/metrics', { token: OPERATOR });
    const text = typeof metrics.body === 'string' ? metrics.body : '';
    expect(text).toMatch(/svc_tls_sessions_total\{result="starttls-not-supported"\} [1-9]/);
    expect(text).toMatch(/svc_tls_reports_sent_total\{status="sent"\} [2-9]/);
  });

  it('a transport that does not trust the MX certificate counts its sessions as certificate-not-trusted', async () => {
    for (const [domain, mx] of [
      ['pool-plain.test', 'mx.plain.test'],
      ['pool-secure.test', 'mx.secure.test'],
    ] as const)
      env.dns.zone.set(domain, 'MX', [{ value: mx, priority: 10 }]);
    const store = env.stack.service.core.db;
    const tls = createTlsOutcomeRecorder({ db: store, periodMs: 86_400_000, flushMs: 60_000 });
    const transport = mxTransport({
      resolver: resolverFor(env.dns.server.address),
      port: env.sink.port,
      heloName: 'pool.test',
      timeouts: { timeoutMs: 10_000 },
      allowPrivate: true,
      shaping: { db: store, config: env.stack.config.shaping },
      tls,
    });
    const before = { plain: plain.sessions, secure: secure.sessions };
    try {
      for (const to of ['a@pool-plain.test', 'b@pool-plain.test', 'c@pool-secure.test', 'd@pool-secure.test']) {
        const out = await transport.send(
          'm',
          { from: 'x@pool.test', to: [to] },
          Buffer.from('Subject: t\r\n\r\nt\r\n'),
          't',
        );
        expect(out).toMatchObject([{ status: 'sent' }]);
      }
    } finally {
      transport.close();
      await tls.close();
    }
    const rows = await store.select().from(db.tlsOutcomes);
    const of = (domain: string) => rows.filter((r) => r.policyDomain === domain).map((r) => [r.result, r.count]);
    expect(of('pool-plain.test')).toEqual([['starttls-not-supported', plain.sessions - before.plain]]);
    expect(of('pool-secure.test')).toEqual([['certificate-not-trusted', secure.sessions - before.secure]]);
    expect(plain.sessions - before.plain).toBeGreaterThan(0);
  });
});
