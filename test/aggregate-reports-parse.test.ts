import { zipSync } from 'fflate';
import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import type { DmarcReport } from '../core/parsing/aggregate-types.js';
import { parseDmarcMail } from '../core/parsing/dmarc.js';
import { reportFixture as fixture, reportMail, zipOf } from './helpers/report-mail.js';

/**
 * DMARC aggregate reports (RFC 7489 appendix C, DMARCbis) as Google, Microsoft and Yahoo mail them, read by
 * the parser the pool runs: every value exact. The hostile cases and TLS reports have files of their own
 * (aggregate-reports-hostile.test.ts, tls-reports-parse.test.ts).
 */
const BOUNDS = { maxBytes: 20 * 1024 * 1024, maxRecords: 10_000 };
const DAY = { beginAt: 1764201600_000, endAt: 1764287999_000 };

async function dmarc(raw: Buffer, bounds = BOUNDS): Promise<DmarcReport> {
  const parsed = await parseDmarcMail(raw, bounds);
  if (!parsed.report) throw new Error(`refused: ${parsed.reason}`);
  return parsed.report;
}
const refusal = async (raw: Buffer) => ((await parseDmarcMail(raw, BOUNDS)) as { reason?: string }).reason;

/** What the storage side will sum: messages per source, and how many passed DMARC (DKIM or SPF aligned). */
function bySource(report: DmarcReport) {
  const out: Record<string, { count: number; passed: number }> = {};
  for (const r of report.records) {
    const s = (out[r.sourceIp] ??= { count: 0, passed: 0 });
    s.count += r.count;
    if (r.dkimAligned || r.spfAligned) s.passed += r.count;
  }
  return out;
}

const xmlPart = (name: string, xml: Buffer): { type: string; name: string; content: Buffer } => ({
  type: 'application/xml',
  name,
  content: xml,
});

describe('DMARC aggregate reports', () => {
  it('Google: a zip as the whole body, read to the last value', async () => {
    const name = 'google.com!example.com!1764201600!1764287999';
    const zip = Buffer.from(zipSync({ [`${name}.xml`]: fixture('google.xml') }));
    const raw = reportMail({
      from: 'noreply-dmarc-support@google.com',
      to: 'dmarc@svc.test',
      subject: 'Report domain: example.com Submitter: google.com Report-ID: 12867901923574626263',
      parts: [{ type: 'application/zip', name: `${name}.zip`, content: zip }],
    });
    expect(await dmarc(raw)).toEqual({
      kind: 'dmarc',
      reporter: 'google.com',
      reporterEmail: 'noreply-dmarc-support@google.com',
      reportId: '12867901923574626263',
      ...DAY,
      policyDomain: 'example.com',
      policy: { adkim: 'r', aspf: 'r', p: 'none', sp: 'none', pct: '100', np: 'none' },
      truncated: false,
      records: [
        {
          sourceIp: '203.0.113.10',
          count: 12,
          disposition: 'none',
          dkimAligned: true,
          spfAligned: true,
          headerFrom: 'example.com',
          envelopeFrom: null,
          dkim: [{ domain: 'example.com', result: 'pass', selector: 'svc1' }],
          spf: [{ domain: 'bounce.example.com', result: 'pass' }],
        },
        {
          sourceIp: '198.51.100.7',
          count: 3,
          disposition: 'none',
          dkimAligned: false,
          spfAligned: false,
          headerFrom: 'example.com',
          envelopeFrom: null,
          dkim: [],
          spf: [{ domain: 'spoofer.test', result: 'softfail' }],
        },
        {
          sourceIp: '2001:db8::25',
          count: 1,
          disposition: 'none',
          dkimAligned: true,
          spfAligned: false,
          headerFrom: 'example.com',
          envelopeFrom: null,
          dkim: [
            { domain: 'example.com', result: 'pass', selector: 'svc1' },
            { domain: 'lists.forwarder.test', result: 'pass', selector: 'fwd' },
          ],
          spf: [{ domain: 'forwarder.test', result: 'pass' }],
        },
      ],
    });
  });

  it('Microsoft: a gzip attachment beside a text part, namespaced, domains lower-cased', async () => {
    const raw = reportMail({
      from: 'dmarcreport@microsoft.com',
      to: 'dmarc@svc.test',
      subject: 'Report Domain: example.com Submitter: protection.outlook.com Report-ID: <6f5a3d0c>',
      parts: [
        { type: 'text/plain', content: 'This is a DMARC aggregate report from Microsoft Corporation.\r\n' },
        {
          type: 'application/gzip',
          name: 'enterprise.protection.outlook.com!example.com!1764201600!1764288000.xml.gz',
          content: gzipSync(fixture('microsoft.xml')),
        },
      ],
    });
    const report = await dmarc(raw);
    expect(report).toMatchObject({
      reporter: 'Outlook.com',
      reporterEmail: 'dmarcreport@microsoft.com',
      reportId: '6f5a3d0c4c5a4d2b9a1c7e2d6b8f1a22',
      beginAt: 1764201600_000,
      endAt: 1764288000_000,
      policyDomain: 'example.com',
      policy: { adkim: 'r', aspf: 'r', p: 'quarantine', sp: 'quarantine', pct: '100', fo: '0' },
      truncated: false,
    });
    expect(report.records).toEqual([
      {
        sourceIp: '203.0.113.10',
        count: 40,
        disposition: 'none',
        dkimAligned: true,
        spfAligned: true,
        headerFrom: 'example.com',
        envelopeFrom: 'bounce.example.com',
        dkim: [{ domain: 'example.com', result: 'pass', selector: 'svc1' }],
        spf: [{ domain: 'bounce.example.com', result: 'pass', scope: 'mfrom' }],
      },
      {
        sourceIp: '192.0.2.99',
        count: 5,
        disposition: 'quarantine',
        dkimAligned: false,
        spfAligned: false,
        headerFrom: 'example.com',
        envelopeFrom: 'example.com',
        dkim: [{ domain: 'example.com', result: 'fail', selector: 'old' }],
        spf: [{ domain: 'example.com', result: 'fail', scope: 'mfrom' }],
      },
    ]);
    expect(bySource(report)).toEqual({
      '203.0.113.10': { count: 40, passed: 40 },
      '192.0.2.99': { count: 5, passed: 0 },
    });
  });

  it('Yahoo: a gzip after a logo, found by its bytes; a reject disposition counted per source', async () => {
    const png = Buffer.from('89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489', 'hex');
    const raw = reportMail({
      from: 'Yahoo DMARC <dmarchelp@yahooinc.com>',
      to: 'dmarc@svc.test',
      subject: 'Report Domain: example.com Submitter: Yahoo Report-ID: <1764288000.712340>',
      parts: [
        { type: 'text/plain', content: 'DMARC aggregate report.\r\n' },
        { type: 'image/png', name: 'logo.png', content: png },
        {
          type: 'application/x-gzip',
          name: 'yahoo.com!example.com!1764201600!1764287999.xml.gz',
          content: gzipSync(fixture('yahoo.xml')),
        },
      ],
    });
    const report = await dmarc(raw);
    expect(report).toMatchObject({
      reporter: 'Yahoo',
      reportId: '1764288000.712340',
      ...DAY,
      policyDomain: 'example.com',
    });
    expect(report.policy).toEqual({ adkim: 'r', aspf: 'r', p: 'reject', pct: '100' });
    expect(report.records.map((r) => [r.sourceIp, r.count, r.disposition, r.dkimAligned, r.spfAligned])).toEqual([
      ['203.0.113.11', 7, 'none', true, false],
      ['198.51.100.66', 2, 'reject', false, false],
    ]);
  });

  it('plain XML with namespace prefixes, CDATA and entities (decoded, never expanded)', async () => {
    const raw = reportMail({
      from: 'DMARC-Reports@att.example',
      to: 'dmarc@svc.test',
      subject: 'Report Domain: mail.example.org',
      parts: [xmlPart('att.example!mail.example.org!1764201600!1764287999.xml', fixture('rfc7489-prefixed.xml'))],
    });
    const report = await dmarc(raw);
    expect(report).toMatchObject({
      reporter: 'AT&T Mail \u2013 Reports',
      reporterEmail: 'dmarc-reports@att.example',
      reportId: 'att-2026-11-27-0001',
      ...DAY,
      policyDomain: 'mail.example.org',
      policy: { adkim: 's', aspf: 's', p: 'reject', sp: 'reject', pct: '100' },
    });
    expect(report.records).toEqual([
      {
        sourceIp: '192.0.2.1',
        count: 2,
        disposition: 'none',
        dkimAligned: false,
        spfAligned: true,
        headerFrom: 'mail.example.org',
        envelopeFrom: null,
        dkim: [{ domain: 'mail.example.org', result: 'fail' }],
        spf: [{ domain: 'mail.example.org', result: 'pass' }],
      },
    ]);
  });

  it('DMARCbis (dmarc-2.0 namespace, np, discovery_method, testing); records that fail validation are skipped', async () => {
    const raw = reportMail({
      from: 'dmarc-reports@receiver.example',
      to: 'dmarc@svc.test',
      subject: 'Report Domain: example.net',
      parts: [
        {
          type: 'text/xml',
          name: 'receiver.example!example.net!1764201600!1764287999.xml',
          content: fixture('dmarcbis.xml'),
        },
      ],
    });
    const report = await dmarc(raw);
    expect(report.policy).toEqual({
      p: 'quarantine',
      sp: 'none',
      np: 'reject',
      adkim: 'r',
      aspf: 'r',
      discovery_method: 'treewalk',
      testing: 'n',
    });
    // `not-an-address` and a count of -3 are dropped; the rest is kept.
    expect(bySource(report)).toEqual({
      '203.0.113.10': { count: 9, passed: 9 },
      '198.51.100.201': { count: 6, passed: 0 },
    });
    expect(report.records[1]).toMatchObject({ disposition: 'quarantine', headerFrom: 'example.net' });
    expect(report.records[1]!.spf).toEqual([{ domain: 'spoof.example', result: 'fail', scope: 'mfrom' }]);
  });

  it('the bytes decide, not the content type: XML as the whole text body, gzip labelled text/plain', async () => {
    const whole = reportMail({
      from: 'a@r.test',
      to: 'dmarc@svc.test',
      subject: 'report',
      parts: [{ type: 'text/xml', content: fixture('yahoo.xml').toString() }],
    });
    expect((await dmarc(whole)).reportId).toBe('1764288000.712340');
    const mislabelled = reportMail({
      from: 'a@r.test',
      to: 'dmarc@svc.test',
      subject: 'report',
      parts: [
        { type: 'text/plain', content: 'see attached\r\n' },
        { type: 'text/plain', name: 'report.dat', content: gzipSync(fixture('google.xml')) },
      ],
    });
    expect((await dmarc(mislabelled)).reportId).toBe('12867901923574626263');
    // A zip of two entries: the .xml one is read, wherever it is.
    const two = Buffer.from(zipSync({ 'README.txt': Buffer.from('hello'), 'r.xml': fixture('microsoft.xml') }));
    const zipped = reportMail({
      from: 'a@r.test',
      to: 'dmarc@svc.test',
      subject: 'r',
      parts: [{ type: 'application/zip', name: 'r.zip', content: two }],
    });
    expect((await dmarc(zipped)).reporter).toBe('Outlook.com');
  });

  it('answers a reason, never throws, for what is not a readable report', async () => {
    const mail = (content: Buffer, type = 'application/octet-stream', name = 'r.xml.gz') =>
      reportMail({ from: 'a@r.test', to: 'dmarc@svc.test', subject: 'r', parts: [{ type, name, content }] });
    const text = reportMail({
      from: 'a@r.test',
      to: 'dmarc@svc.test',
      subject: 'hi',
      parts: [{ type: 'text/plain', content: 'hello\r\n' }],
    });
    expect(await refusal(text)).toBe('not_a_report');
    expect(await refusal(Buffer.from('\x00\x01 not mail at all'))).toBe('not_a_report');
    const noId = fixture('google.xml').toString().replace('<report_id>12867901923574626263</report_id>', '');
    expect(await refusal(mail(Buffer.from(noId), 'application/xml', 'r.xml'))).toBe('missing_fields');
    const noDomain = fixture('yahoo.xml').toString().replace('<domain>example.com</domain>', '');
    expect(await refusal(mail(gzipSync(noDomain)))).toBe('missing_fields');
    const broken = fixture('yahoo.xml').toString().replace('</report_metadata>', '');
    expect(await refusal(mail(gzipSync(broken)))).toBe('bad_xml');
    const corrupt = gzipSync(fixture('google.xml'));
    corrupt.fill(0xff, 20, 60);
    expect(await refusal(mail(corrupt))).toBe('bad_archive');
    expect(await refusal(mail(gzipSync(fixture('google.xml')).subarray(0, 200)))).toBe('bad_archive');
    const noXml = Buffer.from(zipSync({ 'a.txt': Buffer.from('a'), 'b.txt': Buffer.from('b') }));
    expect(await refusal(mail(noXml, 'application/zip', 'r.zip'))).toBe('not_a_report');
    const entries = Array.from({ length: 17 }, (_, i) => ({
      name: `r${i}.xml`,
      data: Buffer.from('<a/>'),
      method: 0 as const,
      size: 4,
    }));
    expect(await refusal(mail(zipOf(entries), 'application/zip', 'r.zip'))).toBe('too_many_entries');
    const json = Buffer.from('{"organization-name":"x"}');
    expect(await refusal(mail(json, 'application/json', 'r.json'))).toBe('not_a_report');
  });
});
