import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { and, eq } from 'drizzle-orm';
import { dkimVerify } from 'mailauth/lib/dkim/verify.js';
import nodemailer from 'nodemailer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { failures } from '../core/operator/checks.js';
import { runDoctor } from '../core/operator/doctor.js';
import { checkTlsCertificate } from '../core/operator/host-checks.js';
import { checkSubmissionCertificate, checkSubmissionPorts } from '../core/operator/submission-checks.js';
import { createResolver } from '../core/dns.js';
import { createServiceDomain } from '../core/domains/service-domain.js';
import { schema } from '../db/index.js';
import { resolverFor, startTestDns } from './helpers/dns.js';
import { freePort } from './helpers/ports.js';
import { startSmtpSink } from './helpers/smtp-sink.js';
import { eventually, startStack, type TestStack } from './helpers/stack.js';

const run = promisify(execFile);
const SERVICE = 'mail.operator.test';
const TOKEN = 'operator-token-0123456789abcdef';
const PTR_NAME = '1.0.0.127.in-addr.arpa';

/** A self-signed certificate for `host`, valid for 30 days (what SMTP_TLS_CERT/SMTP_TLS_KEY point to). */
async function certificateFor(dir: string, host: string) {
  const [key, cert] = [join(dir, 'tls.key'), join(dir, 'tls.crt')];
  await run('openssl', [
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-keyout',
    key,
    '-out',
    cert,
    '-days',
    '30',
    '-subj',
    `/CN=${host}`,
    '-addext',
    `subjectAltName=DNS:${host}`,
  ]);
  return { key, cert };
}

describe('operator setup: the service domain, its signed system mail, and the doctor', () => {
  let stack: TestStack;
  let sink: Awaited<ReturnType<typeof startSmtpSink>>;
  let dns: Awaited<ReturnType<typeof startTestDns>>;
  let dnsPort: number;
  let dir: string;
  let env: Record<string, string>;
  /** The stack's config with the ports its submission role listens on (SUBMISSION_PORT=0 in stacks). */
  const probed = () => ({
    ...stack.config,
    submission: {
      ...stack.config.submission,
      publicPort: stack.service.submissionPort!,
      publicTlsPort: stack.service.submissionsPort!,
    },
  });
  const doctor = () =>
    runDoctor({
      config: probed(),
      database: { db: stack.service.core.db, ping: () => stack.service.core.database.ping() },
      temporal: {
        ping: () => stack.service.core.workflows.ping(),
        retentionMs: () => stack.service.core.workflows.retentionMs(),
      },
    });
  /** The doctor as an operator runs it: `npm run doctor`'s script in a child process. */
  const doctorScript = () =>
    run(join('node_modules', '.bin', 'tsx'), ['scripts/doctor.ts'], {
      env: { ...process.env, ...env },
      timeout: 90_000,
    }).then(
      (r) => ({ code: 0, out: r.stdout }),
      (err: { code: number; stdout: string }) => ({ code: err.code, out: err.stdout }),
    );

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'svc-operator-'));
    const tls = await certificateFor(dir, SERVICE);
    sink = await startSmtpSink({ onRcpt: () => undefined });
    dns = await startTestDns();
    dns.zone.set('rcpt.test', 'MX', [{ value: 'sink.rcpt.test', priority: 10 }]);
    dns.zone.set('sink.rcpt.test', 'A', [{ value: '127.0.0.1' }]);
    dnsPort = await freePort();
    env = {
      OUTBOUND_MODE: 'mx',
      MX_PORT: String(sink.port),
      DNS_SERVERS: dns.server.address,
      SERVICE_DOMAIN: SERVICE,
      PUBLIC_IP: '127.0.0.1',
      SMTP_TLS_KEY: tls.key,
      SMTP_TLS_CERT: tls.cert,
      // Submission is dialled at SUBMISSION_HOST, resolved through DNS_SERVERS (A of SERVICE once published).
      SUBMISSION_HOST: SERVICE,
      OPERATOR_TOKEN: TOKEN,
      SECRET_KEY: 'test-secret-key-0123456789-abcdefghijklmnop',
    };
    stack = await startStack({ ...env, DNS_PORT: String(dnsPort) });
    Object.assign(env, {
      SUBMISSION_PORT: String(stack.service.submissionPort),
      SUBMISSIONS_PORT: String(stack.service.submissionsPort),
      DATABASE_URL: stack.config.databaseUrl!,
      TEMPORAL_ADDRESS: stack.config.temporal.address!,
      DATA_DIR: dir,
    });
  }, 120_000);

  afterAll(async () => {
    await stack?.stop();
    await sink?.close();
    await dns?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('signs the verification mail with the service domain key the built-in DNS server publishes, with a return path on it', async () => {
    expect(
      (
        await stack.api('POST', '/api/auth/signup', {
          body: { email: 'newcomer@rcpt.test', password: 'newcomer password' },
        })
      ).status,
    ).toBe(201);
    const got = await sink.waitFor((r) => r.to.includes('newcomer@rcpt.test'));
    expect(got.from).toMatch(new RegExp(`^bounce\\+msg_[\\w-]+@bounces\\.${SERVICE.replace(/\./g, '\\.')}$`));
    const builtin = resolverFor(`127.0.0.1:${dnsPort}`);
    const verdict = await dkimVerify(got.raw, {
      resolver: ((name: string, rr: string) => builtin.resolve(name, rr)) as never,
    });
    expect(verdict.results[0]).toMatchObject({ status: { result: 'pass' }, signingDomain: SERVICE, selector: 'svc1' });
    // The rest of the service domain's records, answered by the built-in server too.
    expect((await builtin.resolveMx(SERVICE)).map((r) => r.exchange)).toEqual([SERVICE]);
    expect((await builtin.resolveMx(`bounces.${SERVICE}`)).map((r) => r.exchange)).toEqual([SERVICE]);
    expect((await builtin.resolveTxt(SERVICE)).map((c) => c.join(''))).toEqual(['v=spf1 a mx ip4:127.0.0.1 ~all']);
    expect((await builtin.resolveTxt(`_dmarc.${SERVICE}`)).map((c) => c.join(''))[0]).toMatch(/^v=DMARC1;/);
    expect(await builtin.resolve4(SERVICE)).toEqual(['127.0.0.1']);
  });

  it('records a bounce (DSN) of a verification mail that arrives at its return path', async () => {
    await stack.api('POST', '/api/auth/signup', { body: { email: 'gone@rcpt.test', password: 'gone password 1' } });
    const got = await sink.waitFor((r) => r.to.includes('gone@rcpt.test'));
    const id = /^bounce\+(msg_[\w-]+)@/.exec(got.from)![1]!;
    const db = stack.service.core.db;
    const row = async () => (await db.select().from(schema.messages).where(eq(schema.messages.id, id)))[0]!;
    await eventually(async () => (await row()).status === 'sent');
    expect((await row()).kind).toBe('system');
    const boundary = 'dsn-boundary';
    const raw = [
      'From: MAILER-DAEMON@mx.rcpt.test',
      `To: ${got.from}`,
      'Subject: Undelivered Mail Returned to Sender',
      `Content-Type: multipart/report; report-type=delivery-status; boundary="${boundary}"`,
      'MIME-Version: 1.0',
      '',
      `--${boundary}`,
      'Content-Type: text/plain',
      '',
      'Your message could not be delivered.',
      '',
      `--${boundary}`,
      'Content-Type: message/delivery-status',
      '',
      'Reporting-MTA: dns; mx.rcpt.test',
      '',
      'Final-Recipient: rfc822; gone@rcpt.test',
      'Action: failed',
      'Status: 5.1.1',
      'Diagnostic-Code: smtp; 550 5.1.1 mailbox gone',
      '',
      `--${boundary}--`,
      '',
    ].join('\r\n');
    const t = nodemailer.createTransport({
      host: '127.0.0.1',
      port: stack.service.smtpPort!,
      secure: false,
      ignoreTLS: true,
    });
    await t.sendMail({ envelope: { from: '', to: [got.from] }, raw });
    const bounced = await eventually(async () => {
      const r = await row();
      return r.status === 'bounced' ? r : undefined;
    });
    expect(bounced).toMatchObject({
      bounceType: 'hard',
      recipients: { 'gone@rcpt.test': { status: 'bounced', response: '550 5.1.1 mailbox gone' } },
    });
    const events = await db
      .select()
      .from(schema.events)
      .where(and(eq(schema.events.messageId, id), eq(schema.events.type, 'email.bounced')));
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ recipient: 'gone@rcpt.test', data: { bounce: { type: 'hard' } } });
  });

  it('names every missing record; once the records it lists are published, every check is green', async () => {
    const before = await doctor();
    expect(failures(before).map((c) => c.id)).toEqual([
      'dns.mx',
      'dns.address',
      'dns.mx-hosts',
      'dns.spf',
      'dns.dkim',
      'dns.dmarc',
      'dns.bounces-mx',
      'dns.bounces-spf',
      'dns.ptr',
      'submission.starttls', // SUBMISSION_HOST does not resolve before its A record is published
      'submission.tls',
    ]);
    expect(before.find((c) => c.id === 'dns.dkim')!.fix).toMatch(
      /^publish TXT svc1\._domainkey\.mail\.operator\.test "v=DKIM1; k=rsa; p=/,
    );

    expect((await stack.api('GET', '/api/health?detail=1')).status).toBe(401);
    expect((await stack.api('GET', '/api/health?detail=1', { token: 'wrong' })).status).toBe(401);
    const detail = await stack.api('GET', '/api/health?detail=1', { token: TOKEN });
    expect(detail).toMatchObject({ status: 503, body: { ok: false, failed: expect.arrayContaining(['dns.mx']) } });
    for (const r of detail.body.records)
      dns.zone.add({ name: r.name, type: r.type, value: r.value, priority: r.priority });
    dns.zone.set(PTR_NAME, 'PTR', [{ value: SERVICE }]);

    const after = await doctor();
    const byStatus = (s: string) => after.filter((c) => c.status === s).map((c) => c.id);
    expect(byStatus('fail')).toEqual([]);
    // The test certificate is self-signed: a warning outside production (a failure in it).
    expect(byStatus('warn')).toEqual(['submission.cert']);
    expect(after.find((c) => c.id === 'submission.cert')!.detail).toMatch(/^self-signed/);
    expect(after.find((c) => c.id === 'submission.starttls')!.detail).toMatch(
      /greets, offers STARTTLS, then AUTH PLAIN LOGIN$/,
    );
    expect(after.find((c) => c.id === 'submission.tls')!.detail).toMatch(/completes a TLS handshake/);
    // offline here: said so, not failed; the shipped egress.toml's default source has no bind_address to check
    expect(byStatus('skipped')).toEqual(['smtp.port25', 'egress.source.default']);
    expect(after.find((c) => c.id === 'smtp.port25')!.detail).toMatch(/^offline\?/);
    expect(after.map((c) => c.id)).toEqual(
      expect.arrayContaining([
        'smtp.tls',
        'submission.cert',
        'secret.key',
        'outbound.mode',
        'database',
        'temporal',
        'temporal.retention',
      ]),
    );
    expect((await stack.api('GET', '/api/health?detail=1', { token: TOKEN })).body).toMatchObject({
      ok: true,
      failed: [],
    });
    const plain = await stack.api('GET', '/api/health');
    expect(Object.keys(plain.body).sort()).toEqual(['database', 'ok', 'temporal']);
  });

  it('roles booting together agree on one service domain key', async () => {
    const { db, sealer } = stack.service.core;
    const roles = [0, 1, 2].map(() => createServiceDomain({ db, sealer, domain: 'race.operator.test' }));
    const rows = await Promise.all(roles.map((r) => r.ensure()));
    expect(new Set(rows.map((r) => r.dkimPublicKey)).size).toBe(1);
    expect((await roles[1]!.signer()).privateKey).toMatch(/^-----BEGIN PRIVATE KEY-----/);
  });

  it('the STARTTLS check fails for a certificate of another host, an expired one, and none at all', async () => {
    const other = await certificateFor(mkdtempSync(join(dir, 'other-')), 'other.test');
    const smtp = (files: { key?: string; cert?: string }) => ({
      ...stack.config,
      smtp: { ...stack.config.smtp, tlsKeyFile: files.key, tlsCertFile: files.cert },
    });
    expect(checkTlsCertificate(smtp(other))).toMatchObject({
      status: 'fail',
      detail: expect.stringContaining('not mail.operator.test'),
    });
    expect(checkTlsCertificate(stack.config, Date.now() + 60 * 86_400_000)).toMatchObject({
      status: 'fail',
      detail: expect.stringMatching(/^expired /),
    });
    expect(checkTlsCertificate(stack.config, Date.now() + 20 * 86_400_000)).toMatchObject({ status: 'warn' });
    expect(checkTlsCertificate(smtp({}))).toMatchObject({
      status: 'fail',
      fix: expect.stringContaining('SMTP_TLS_CERT'),
    });
    expect(checkTlsCertificate(smtp({ key: other.key, cert: stack.config.smtp.tlsCertFile }))).toMatchObject({
      status: 'fail',
      detail: expect.stringContaining('does not belong'),
    });
  });

  it('the submission checks: a self-signed or missing certificate fails in production, another host fails, a closed port fails', async () => {
    const other = await certificateFor(mkdtempSync(join(dir, 'other-')), 'other.test');
    const production = { ...stack.config, env: 'production' };
    expect(checkSubmissionCertificate(production)).toMatchObject({
      status: 'fail',
      detail: expect.stringMatching(/^self-signed/),
    });
    expect(
      checkSubmissionCertificate({ ...production, smtp: { ...stack.config.smtp, tlsCertFile: undefined } }),
    ).toMatchObject({
      status: 'fail',
      detail: expect.stringContaining('development certificate'),
    });
    expect(
      checkSubmissionCertificate({
        ...stack.config,
        smtp: { ...stack.config.smtp, tlsKeyFile: other.key, tlsCertFile: other.cert },
      }),
    ).toMatchObject({ status: 'fail', detail: expect.stringContaining('not mail.operator.test') });
    expect(checkSubmissionCertificate(stack.config, Date.now() + 60 * 86_400_000)).toMatchObject({
      status: 'fail',
      detail: expect.stringMatching(/^expired /),
    });

    const closed = await freePort();
    const results = await checkSubmissionPorts(createResolver([]), {
      ...stack.config,
      submission: { ...stack.config.submission, host: '127.0.0.1', publicPort: closed, publicTlsPort: closed },
    });
    expect(results.map((r) => [r.id, r.status])).toEqual([
      ['submission.starttls', 'fail'],
      ['submission.tls', 'fail'],
    ]);
    expect(results[0]!.fix).toContain('npm run start:submission');
    // The ingress port speaks SMTP but offers no AUTH: not a submission server.
    const [ingress] = await checkSubmissionPorts(createResolver([]), {
      ...stack.config,
      submission: {
        ...stack.config.submission,
        host: '127.0.0.1',
        publicPort: stack.service.smtpPort!,
        publicTlsPort: 0,
      },
    });
    expect(ingress).toMatchObject({ id: 'submission.starttls', status: 'fail' });
  });

  it('npm run doctor: exit 0 with one line per check; with the DMARC record gone it names it and exits 1', async () => {
    const green = await doctorScript();
    expect(green.code, green.out).toBe(0);
    expect(green.out).toMatch(/^OK +dns\.dkim /m);
    expect(green.out).toMatch(/^SKIPPED +smtp\.port25 .*offline\?/m);
    expect(green.out).toMatch(/^OK +submission\.starttls /m);
    expect(green.out).toMatch(/^OK +submission\.tls /m);
    expect(green.out).toContain('All required checks passed.');

    dns.zone.remove(`_dmarc.${SERVICE}`);
    const red = await doctorScript();
    expect(red.code).toBe(1);
    expect(red.out).toMatch(
      /^FAIL +dns\.dmarc .*no DMARC record at _dmarc\.mail\.operator\.test.*fix: publish TXT _dmarc\.mail\.operator\.test "v=DMARC1/m,
    );
    expect(red.out).toMatch(/^FAILED: dns\.dmarc$/m);
  });
});
