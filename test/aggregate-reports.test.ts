import { deflateRawSync, gzipSync } from 'node:zlib';
import { zipSync } from 'fflate';
import nodemailer from 'nodemailer';
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schema } from '../db/index.js';
import { expectHealthUp, watchHealth } from './helpers/health-probe.js';
import { startStack, type TestStack } from './helpers/stack.js';

/**
 * DMARC aggregate and TLS reports mailed to the running service over SMTP (docs/feedback.md): each is read
 * in the parse pool and stored per domain, and the summaries count exactly what the reports said.
 */
const SERVICE = 'agg.svc.test';
const DOMAIN = `sender.${SERVICE}`;
const PUBLIC_IP = '198.51.100.7';
const DAY = 86_400_000;
const today = Math.floor(Date.now() / DAY) * DAY;
const sec = (ms: number) => Math.floor(ms / 1000);

type Row = {
  ip: string;
  count: number;
  disposition: string;
  dkim: 'pass' | 'fail';
  spf: 'pass' | 'fail';
  from?: string;
};

/** An aggregate report as RFC 7489 appendix C shapes it; `ns` gives DMARCbis' namespace (Microsoft's shape). */
function dmarcXml(o: { org: string; email: string; id: string; begin: number; rows: Row[]; ns?: boolean }) {
  const records = o.rows
    .map(
      (r) => `<record><row><source_ip>${r.ip}</source_ip><count>${r.count}</count><policy_evaluated>
<disposition>${r.disposition}</disposition><dkim>${r.dkim}</dkim><spf>${r.spf}</spf></policy_evaluated></row>
<identifiers><header_from>${r.from ?? DOMAIN}</header_from></identifiers><auth_results>
<dkim><domain>${r.from ?? DOMAIN}</domain><selector>s1</selector><result>${r.dkim}</result></dkim>
<spf><domain>bounces.${DOMAIN}</domain><result>${r.spf}</result></spf></auth_results></record>`,
    )
    .join('\n');
  return `<?xml version="1.0" encoding="UTF-8" ?>
<feedback${o.ns ? ' xmlns="urn:ietf:params:xml:ns:dmarc-2.0"' : ''}>${o.ns ? '<version>1.0</version>' : ''}
<report_metadata><org_name>${o.org}</org_name><email>${o.email}</email><report_id>${o.id}</report_id>
<date_range><begin>${sec(o.begin)}</begin><end>${sec(o.begin + DAY - 1000)}</end></date_range></report_metadata>
<policy_published><domain>${DOMAIN}</domain><adkim>r</adkim><aspf>r</aspf><p>none</p><sp>none</sp><pct>100</pct></policy_published>
${records}
</feedback>`;
}

function tlsJson(o: { id: string; begin: number; success: number; failures: { type: string; sessions: number }[] }) {
  return JSON.stringify({
    'organization-name': 'Company-X',
    'date-range': {
      'start-datetime': new Date(o.begin).toISOString(),
      'end-datetime': new Date(o.begin + DAY - 1000).toISOString(),
    },
    'contact-info': 'sts-reporting@company-x.example',
    'report-id': o.id,
    policies: [
      {
        policy: { 'policy-type': 'no-policy-found', 'policy-domain': DOMAIN },
        summary: {
          'total-successful-session-count': o.success,
          'total-failure-session-count': o.failures.reduce((n, f) => n + f.sessions, 0),
        },
        'failure-details': o.failures.map((f) => ({
          'result-type': f.type,
          'sending-mta-ip': '203.0.113.9',
          'receiving-mx-hostname': `mx.${DOMAIN}`,
          'failed-session-count': f.sessions,
        })),
      },
    ],
  });
}

describe('DMARC and TLS reports received over SMTP', () => {
  let stack: TestStack;
  let token: string;
  let domainId: string;
  let smtp: ReturnType<typeof nodemailer.createTransport>;
  const mail = (to: string, attachment: { filename: string; contentType: string; content: Buffer }) =>
    smtp.sendMail({
      from: 'noreply-dmarc-support@google.com',
      to,
      subject: `Report domain: ${DOMAIN} Submitter: google.com`,
      text: 'This is an aggregate report.',
      attachments: [attachment],
    });
  const summary = (path: string, t = token) => stack.api('GET', `/api/domains/${domainId}/${path}`, { token: t });

  beforeAll(async () => {
    stack = await startStack({
      SERVICE_DOMAIN: SERVICE,
      DNS_SERVERS: '127.0.0.1:9',
      PUBLIC_IP,
      DMARC_MAX_RECORDS: '5000',
      REPORT_MAX_BYTES: String(16 * 1024 * 1024),
    });
    token = (
      await stack.api('POST', '/api/auth/signup', { body: { email: 'agg@example.com', password: 'agg password 1' } })
    ).body.token;
    await stack.service.core.db
      .update(schema.users)
      .set({ emailVerified: true })
      .where(eq(schema.users.email, 'agg@example.com'));
    const claimed = await stack.api('POST', '/api/domains/subdomain', { token, body: { subdomain: 'sender' } });
    expect(claimed.status).toBeLessThan(300);
    domainId = claimed.body.domain.id;
    smtp = nodemailer.createTransport({ host: '127.0.0.1', port: stack.service.smtpPort!, ignoreTLS: true });
  });
  afterAll(async () => {
    smtp?.close();
    await stack?.stop();
  });

  it('publishes the rua, the TLS-RPT record and the external-destination authorization', async () => {
    // A hosted subdomain's records are served by the built-in DNS server (what any domain is asked to publish).
    const hosted = stack.service.core.hosted;
    const txt = async (name: string) => (await hosted.lookup(name, 'TXT')).records.map((r) => r.value);
    expect(await txt(`_dmarc.${DOMAIN}`)).toEqual([`v=DMARC1; p=none; rua=mailto:dmarc@${SERVICE}`]);
    expect(await txt(`_smtp._tls.${DOMAIN}`)).toEqual([`v=TLSRPTv1; rua=mailto:tlsrpt@${SERVICE}`]);
    expect(await txt(`${DOMAIN}._report._dmarc.${SERVICE}`)).toEqual(['v=DMARC1']);
    expect(await txt(`elsewhere.example._report._dmarc.${SERVICE}`)).toEqual([]);
  });

  it('stores Google (zip), Microsoft (gzip, namespaced) and Yahoo (plain XML) reports and sums them exactly', async () => {
    const google = dmarcXml({
      org: 'google.com',
      email: 'noreply-dmarc-support@google.com',
      id: '1234567890123456789',
      begin: today - 2 * DAY,
      rows: [
        { ip: PUBLIC_IP, count: 40, disposition: 'none', dkim: 'pass', spf: 'pass' },
        { ip: '203.0.113.50', count: 5, disposition: 'none', dkim: 'fail', spf: 'fail' },
      ],
    });
    const microsoft = dmarcXml({
      org: 'Outlook.com',
      email: 'dmarcreport@microsoft.com',
      id: 'f2c8d7e5a1b34c1b9a2e8d7c6b5a4f3e',
      begin: today - DAY,
      ns: true,
      rows: [
        { ip: PUBLIC_IP, count: 12, disposition: 'none', dkim: 'pass', spf: 'fail' },
        { ip: '203.0.113.50', count: 3, disposition: 'quarantine', dkim: 'fail', spf: 'fail' },
      ],
    });
    const yahoo = dmarcXml({
      org: 'Yahoo',
      email: 'dmarchelp@yahooinc.com',
      id: '1700000000.123456',
      begin: today - DAY,
      rows: [{ ip: '192.0.2.77', count: 2, disposition: 'reject', dkim: 'fail', spf: 'pass' }],
    });
    const dmarc = `dmarc@${SERVICE}`;
    await mail(dmarc, {
      filename: `google.com!${DOMAIN}!1700000000!1700086399.zip`,
      contentType: 'application/zip',
      content: Buffer.from(zipSync({ [`google.com!${DOMAIN}!1700000000!1700086399.xml`]: Buffer.from(google) })),
    });
    await mail(dmarc, {
      filename: `enterprise.protection.outlook.com!${DOMAIN}!1700000000!1700086400.xml.gz`,
      contentType: 'application/gzip',
      content: gzipSync(microsoft),
    });
    await mail(dmarc, { filename: 'report.xml', contentType: 'text/xml', content: Buffer.from(yahoo) });
    // The same Google report again (reporters resend): kept once.
    await mail(dmarc, {
      filename: 'again.zip',
      contentType: 'application/zip',
      content: Buffer.from(zipSync({ 'again.xml': Buffer.from(google) })),
    });

    const s = (await summary('dmarc?days=7')).body;
    expect(s.totals).toEqual({ messages: 62, aligned: 54, pass_rate: 54 / 62, reports: 3 });
    expect(s.sources).toEqual([
      {
        source_ip: PUBLIC_IP,
        messages: 52,
        aligned: 52,
        dkim_aligned: 52,
        spf_aligned: 40,
        dispositions: { none: 52, quarantine: 0, reject: 0 },
        platform: true,
        reporters: ['Outlook.com', 'google.com'],
      },
      {
        source_ip: '203.0.113.50',
        messages: 8,
        aligned: 0,
        dkim_aligned: 0,
        spf_aligned: 0,
        dispositions: { none: 5, quarantine: 3, reject: 0 },
        platform: false,
        reporters: ['Outlook.com', 'google.com'],
      },
      {
        source_ip: '192.0.2.77',
        messages: 2,
        aligned: 2,
        dkim_aligned: 0,
        spf_aligned: 2,
        dispositions: { none: 0, quarantine: 0, reject: 2 },
        platform: false,
        reporters: ['Yahoo'],
      },
    ]);
    expect(s.failing).toEqual([{ source_ip: '203.0.113.50', messages: 8, platform: false }]);
    expect(s.days).toEqual([
      { day: today - 2 * DAY, messages: 45, aligned: 40, failed: 5 },
      { day: today - DAY, messages: 17, aligned: 14, failed: 3 },
    ]);
    // The domain row carries the last 7 days' figure.
    const row = (await stack.api('GET', `/api/domains/${domainId}`, { token })).body.domain;
    expect(row.feedback.dmarc).toEqual({ days: 7, messages: 62, aligned: 54, pass_rate: 54 / 62, failing_sources: 1 });
    expect(s.reporters.map((r: any) => [r.reporter, r.reports, r.messages])).toEqual([
      ['Outlook.com', 1, 15],
      ['Yahoo', 1, 2],
      ['google.com', 1, 45],
    ]);
  });

  it('stores a TLS report (gzip) and shows its failure types', async () => {
    await mail(`tlsrpt@${SERVICE}`, {
      filename: `company-x.example!${DOMAIN}!${sec(today - DAY)}!${sec(today)}!001.json.gz`,
      contentType: 'application/tlsrpt+gzip',
      content: gzipSync(
        tlsJson({
          id: '2026-11-27T00:00:00Z_' + DOMAIN,
          begin: today - DAY,
          success: 90,
          failures: [
            { type: 'certificate-expired', sessions: 4 },
            { type: 'starttls-not-supported', sessions: 6 },
          ],
        }),
      ),
    });
    const s = (await summary('tls-reports')).body;
    expect(s.totals).toEqual({ success: 90, failure: 10, reports: 1 });
    expect(s.failure_types).toEqual([
      { result_type: 'starttls-not-supported', sessions: 6 },
      { result_type: 'certificate-expired', sessions: 4 },
    ]);
    expect(s.days).toEqual([{ day: today - DAY, success: 90, failure: 10 }]);
    expect(s.reports[0]).toMatchObject({ reporter: 'Company-X', success: 90, failure: 10 });
  });

  it('a deleted domain takes its reports with it', async () => {
    const t = (
      await stack.api('POST', '/api/auth/signup', { body: { email: 'agg3@example.com', password: 'agg password 3' } })
    ).body.token;
    const other = await stack.api('POST', '/api/domains/subdomain', { token: t, body: { subdomain: 'gone' } });
    const name = `gone.${SERVICE}`;
    await mail(`dmarc@${SERVICE}`, {
      filename: 'gone.xml',
      contentType: 'text/xml',
      content: Buffer.from(
        dmarcXml({
          org: 'google.com',
          email: 'noreply-dmarc-support@google.com',
          id: 'gone-1',
          begin: today,
          rows: [{ ip: PUBLIC_IP, count: 3, disposition: 'none', dkim: 'pass', spf: 'pass', from: name }],
        }).replace(`<domain>${DOMAIN}</domain><adkim>`, `<domain>${name}</domain><adkim>`),
      ),
    });
    const id = other.body.domain.id as string;
    const rowsOf = async () =>
      (await stack.service.core.db.select().from(schema.dmarcRows).where(eq(schema.dmarcRows.domainId, id))).length;
    expect(await rowsOf()).toBe(1);
    expect((await stack.api('DELETE', `/api/domains/${id}`, { token: t })).status).toBe(200);
    expect(await rowsOf()).toBe(0);
    expect(
      await stack.service.core.db.select().from(schema.dmarcReports).where(eq(schema.dmarcReports.domainId, id)),
    ).toEqual([]);
  });

  it("is another tenant's 404, and a scoped key of another domain's", async () => {
    const other = (
      await stack.api('POST', '/api/auth/signup', { body: { email: 'agg2@example.com', password: 'agg password 2' } })
    ).body.token;
    expect((await summary('dmarc', other)).status).toBe(404);
    expect((await summary('tls-reports', other)).status).toBe(404);
    const key = (await stack.api('GET', '/api/keys', { token: other })).body.key;
    expect((await summary('dmarc', key)).status).toBe(404);
  });

  it('refuses hostile reports within the parsing bounds while health answers', async () => {
    // The payloads are built first: the service runs in this process, and compressing them would stall it.
    const bomb = zipOf('bomb.xml', deflateRawSync(Buffer.alloc(256 * 1024 * 1024)), 256 * 1024 * 1024);
    const huge = zipOf('huge.xml', deflateRawSync(Buffer.alloc(32 * 1024 * 1024, 0x20)), 1024 ** 3);
    const rows = (n: number) =>
      Array.from({ length: n }, (_, i) => ({
        ip: `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`,
        count: 1,
        disposition: 'none',
        dkim: 'fail' as const,
        spf: 'fail' as const,
      }));
    const flood = (id: string, n: number) =>
      gzipSync(dmarcXml({ org: 'flood.example', email: 'x@flood.example', id, begin: today, rows: rows(n) }));
    const many = flood('many', 100_000);
    const cut = flood('cut', 20_000);
    const health = await watchHealth(stack.baseUrl);
    const before = await stack.service.core.db.select().from(schema.dmarcReports);
    const refused = async (attachment: { filename: string; contentType: string; content: Buffer }) => {
      const err = await mail(`dmarc@${SERVICE}`, attachment).then(
        () => undefined,
        (e: { responseCode?: number }) => e,
      );
      expect(err?.responseCode).toBe(554);
    };
    // A zip bomb: 256 MiB of zeros deflated to a quarter of a megabyte, against a 16 MiB bound.
    await refused({
      filename: 'bomb.zip',
      contentType: 'application/zip',
      content: bomb,
    });
    // A zip whose entry declares 1 GB (and inflates to as much as it can).
    await refused({
      filename: 'huge.zip',
      contentType: 'application/zip',
      content: huge,
    });
    // A billion laughs.
    const laughs =
      '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">' +
      Array.from({ length: 9 }, (_, i) => `<!ENTITY lol${i + 1} "${`&lol${i || ''};`.repeat(10)}">`).join('') +
      ']><feedback><report_metadata><org_name>&lol9;</org_name></report_metadata></feedback>';
    await refused({ filename: 'lol.xml', contentType: 'text/xml', content: Buffer.from(laughs) });
    // 100,000 records (about 45 MB of XML, 1 MB gzipped): past the size bound, refused as it inflates.
    await refused({ filename: 'many.xml.gz', contentType: 'application/gzip', content: many });
    // 20,000 records within the size bound: the first DMARC_MAX_RECORDS are kept and the report says it was cut.
    await mail(`dmarc@${SERVICE}`, {
      filename: 'cut.xml.gz',
      contentType: 'application/gzip',
      content: cut,
    });
    const kept = (await stack.service.core.db.select().from(schema.dmarcReports)).find((r) => r.reportId === 'cut');
    expect(kept).toMatchObject({ truncated: true, records: 5000, messages: 5000 });
    expect((await stack.service.core.db.select().from(schema.dmarcReports)).length).toBe(before.length + 1);
    expectHealthUp(await health.stop());
  }, 120_000);
});

/** A one-entry zip whose headers declare `declared` bytes uncompressed, whatever the data inflates to. */
function zipOf(name: string, deflated: Buffer, declared: number): Buffer {
  const file = Buffer.from(name);
  const local = Buffer.alloc(30);
  local.writeUInt32LE(0x04034b50, 0);
  local.writeUInt16LE(20, 4);
  local.writeUInt16LE(8, 8); // deflate
  local.writeUInt32LE(0, 14); // crc (never reached: the bound ends the inflate first)
  local.writeUInt32LE(deflated.length, 18);
  local.writeUInt32LE(Math.min(declared, 0xffffffff), 22);
  local.writeUInt16LE(file.length, 26);
  const central = Buffer.alloc(46);
  central.writeUInt32LE(0x02014b50, 0);
  central.writeUInt16LE(20, 4);
  central.writeUInt16LE(20, 6);
  central.writeUInt16LE(8, 10);
  central.writeUInt32LE(deflated.length, 20);
  central.writeUInt32LE(Math.min(declared, 0xffffffff), 24);
  central.writeUInt16LE(file.length, 28);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(1, 8);
  end.writeUInt16LE(1, 10);
  end.writeUInt32LE(46 + file.length, 12);
  end.writeUInt32LE(30 + file.length + deflated.length, 16);
  return Buffer.concat([local, file, deflated, central, file, end]);
}
