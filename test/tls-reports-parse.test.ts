import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import type { TlsReport } from '../core/parsing/aggregate-types.js';
import { parseTlsReportMail } from '../core/parsing/tls-report.js';
import { gzipBomb, reportFixture as fixture, reportMail } from './helpers/report-mail.js';

/** TLS reports (RFC 8460) as reporters mail them (section 5.3: multipart/report; report-type=tlsrpt), read exactly. */
const BOUNDS = { maxBytes: 20 * 1024 * 1024, maxRecords: 10_000 };

const mail = (
  content: Buffer,
  type = 'application/tlsrpt+gzip',
  name = 'google.com!example.com!1764201600!1764287999!001.json.gz',
) =>
  reportMail({
    from: 'noreply-smtp-tls-reporting@google.com',
    to: 'tlsrpt@svc.test',
    subject: 'Report Domain: example.com Submitter: google.com Report-ID: <2026-11-27T00:00:00Z_example.com>',
    tlsrpt: true,
    parts: [
      { type: 'text/plain', content: 'This is an aggregate TLS report from google.com\r\n' },
      { type, name, content },
    ],
  });

async function tls(raw: Buffer, bounds = BOUNDS): Promise<TlsReport> {
  const parsed = await parseTlsReportMail(raw, bounds);
  if (!parsed.report) throw new Error(`refused: ${parsed.reason}`);
  return parsed.report;
}
const refusal = async (raw: Buffer, bounds = BOUNDS) =>
  ((await parseTlsReportMail(raw, bounds)) as { reason?: string }).reason;

describe('TLS reports (RFC 8460)', () => {
  it("section 4.4's example, plain application/tlsrpt+json: every field", async () => {
    const raw = mail(
      fixture('rfc8460-example.json'),
      'application/tlsrpt+json',
      'company-x.example!company-y.example!1459468800!1459555199.json',
    );
    expect(await tls(raw)).toEqual({
      kind: 'tls',
      reporter: 'Company-X',
      contact: 'sts-reporting@company-x.example',
      reportId: '5065427c-23d3-47ca-b6e0-946ea0e8c4be',
      beginAt: Date.UTC(2016, 3, 1),
      endAt: Date.UTC(2016, 3, 1, 23, 59, 59),
      truncated: false,
      policies: [
        {
          policyType: 'sts',
          policyDomain: 'company-y.example',
          policyStrings: ['version: STSv1', 'mode: testing', 'mx: *.mail.company-y.example', 'max_age: 86400'],
          mxHosts: ['*.mail.company-y.example'],
          success: 5326,
          failure: 303,
          failures: [
            {
              resultType: 'certificate-expired',
              sendingMtaIp: '2001:db8:abcd:0012::1',
              receivingMxHostname: 'mx1.mail.company-y.example',
              receivingIp: null,
              failedSessions: 100,
              additionalInformation: null,
              failureReasonCode: null,
            },
            {
              resultType: 'starttls-not-supported',
              sendingMtaIp: '2001:db8:abcd:0013::1',
              receivingMxHostname: 'mx2.mail.company-y.example',
              receivingIp: '203.0.113.56',
              failedSessions: 200,
              additionalInformation:
                'https://reports.company-x.example/report_info?id=5065427c-23d3#StarttlsNotSupported',
              failureReasonCode: null,
            },
            {
              resultType: 'validation-failure',
              sendingMtaIp: '198.51.100.62',
              receivingMxHostname: 'mx-backup.mail.company-y.example',
              receivingIp: '203.0.113.58',
              failedSessions: 3,
              additionalInformation: null,
              // The example spells the field `failure-error-code`; section 4.3 `failure-reason-code`: both are read.
              failureReasonCode: 'X509_V_ERR_PROOF_OF_POLICY',
            },
          ],
        },
      ],
    });
  });

  it('a gzip report (application/tlsrpt+gzip) with a no-policy-found policy and its failure types', async () => {
    const report = await tls(mail(gzipSync(fixture('google-tls.json'))));
    expect(report).toMatchObject({
      reporter: 'Google Inc.',
      contact: 'smtp-tls-reporting@google.com',
      reportId: '2026-11-27T00:00:00Z_example.com',
      beginAt: Date.UTC(2026, 10, 27),
      endAt: Date.UTC(2026, 10, 27, 23, 59, 59),
      truncated: false,
    });
    expect(report.policies.map((p) => [p.policyType, p.policyDomain, p.success, p.failure, p.mxHosts])).toEqual([
      ['sts', 'example.com', 1207, 0, ['mx.example.com']],
      ['no-policy-found', 'lists.example.com', 14, 2, []],
    ]);
    expect(report.policies[1]!.failures).toEqual([
      {
        resultType: 'starttls-not-supported',
        sendingMtaIp: '209.85.220.41',
        receivingMxHostname: 'mx2.lists.example.com.',
        receivingIp: '198.51.100.25',
        failedSessions: 2,
        additionalInformation: null,
        failureReasonCode: 'STARTTLS not offered',
      },
    ]);
    // Labelled application/octet-stream, found by its bytes all the same.
    expect((await tls(mail(gzipSync(fixture('google-tls.json')), 'application/octet-stream', 'x.bin'))).reportId).toBe(
      '2026-11-27T00:00:00Z_example.com',
    );
  });

  it('policies and failure details share the record bound; strings are cut to 255 characters', async () => {
    const doc = JSON.parse(fixture('google-tls.json').toString()) as { policies: { 'failure-details'?: unknown[] }[] };
    const detail = {
      'result-type': 'validation-failure',
      'failed-session-count': 1,
      'additional-information': 'x'.repeat(300),
    };
    doc.policies[0]!['failure-details'] = Array.from({ length: 12_000 }, () => detail);
    const report = await tls(mail(gzipSync(JSON.stringify(doc))), BOUNDS);
    expect(report.truncated).toBe(true);
    expect(report.policies).toHaveLength(1);
    expect(report.policies[0]!.failures).toHaveLength(9_999);
    expect(report.policies[0]!.failures[0]!.additionalInformation).toHaveLength(255);
    const whole = await tls(mail(gzipSync(fixture('google-tls.json'))), { maxBytes: BOUNDS.maxBytes, maxRecords: 3 });
    expect(whole.truncated).toBe(false);
    const cut = await tls(mail(gzipSync(fixture('google-tls.json'))), { maxBytes: BOUNDS.maxBytes, maxRecords: 2 });
    expect(cut.truncated).toBe(true);
    expect(cut.policies.map((p) => p.failures.length)).toEqual([0, 0]);
  });

  it('refusals: not JSON, missing fields, a gzip bomb, too many objects, an XML report', async () => {
    expect(await refusal(mail(gzipSync('{"organization-name": '), 'application/tlsrpt+gzip'))).toBe('bad_json');
    const noId = JSON.stringify({ ...JSON.parse(fixture('google-tls.json').toString()), 'report-id': undefined });
    expect(await refusal(mail(Buffer.from(noId), 'application/tlsrpt+json', 'r.json'))).toBe('missing_fields');
    const badDate = fixture('google-tls.json').toString().replace('2026-11-27T00:00:00Z"', 'yesterday"');
    expect(await refusal(mail(gzipSync(badDate)))).toBe('missing_fields');
    const started = performance.now();
    expect(await refusal(mail(await gzipBomb(200, 1000)))).toBe('report_too_large');
    expect(performance.now() - started).toBeLessThan(5_000);
    const nested = `{"report-id":"x","policies":${'['.repeat(100_000)}${']'.repeat(100_000)}}`;
    expect(await refusal(mail(gzipSync(nested)), { maxBytes: BOUNDS.maxBytes, maxRecords: 10 })).toBe(
      'too_many_elements',
    );
    expect(await refusal(mail(gzipSync(fixture('google.xml')), 'application/gzip', 'r.xml.gz'))).toBe('not_a_report');
    const text = reportMail({
      from: 'a@r.test',
      to: 'tlsrpt@svc.test',
      subject: 'hi',
      parts: [{ type: 'text/plain', content: 'hello\r\n' }],
    });
    expect(await refusal(text)).toBe('not_a_report');
  });
});
