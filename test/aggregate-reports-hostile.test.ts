import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createParsePool, type ParsePool } from '../core/parsing/pool.js';
import { parseDmarcMail } from '../core/parsing/dmarc.js';
import { gzipBomb, reportFixture as fixture, reportMail, zipBomb, zipOf } from './helpers/report-mail.js';

/**
 * Hostile DMARC reports: each is refused or truncated within the parser's bounds, quickly, and the process
 * grows by far less than what the report would inflate to (the bombs hold 200 MB).
 */
const BOUNDS = { maxBytes: 20 * 1024 * 1024, maxRecords: 10_000 };
const MB = 1024 * 1024;

const attached = (
  content: Buffer,
  type = 'application/gzip',
  name = 'reporter!example.com!1764201600!1764287999.xml.gz',
) =>
  reportMail({
    from: 'r@reporter.test',
    to: 'dmarc@svc.test',
    subject: 'Report Domain: example.com',
    parts: [{ type, name, content }],
  });

/** Parses `raw`; the answer, the time it took and how much the process's resident memory grew. */
async function measured(raw: Buffer, bounds = BOUNDS) {
  const rss = process.memoryUsage().rss;
  const started = performance.now();
  const answer = await parseDmarcMail(raw, bounds);
  const ms = Math.round(performance.now() - started);
  const grewMb = Math.round((process.memoryUsage().rss - rss) / MB);
  return { answer, ms, grewMb };
}

/** A report of `n` records, each from its own source (10.x.y.z), `i + 1` messages. */
function manyRecords(n: number): string {
  const head = fixture('yahoo.xml').toString().split('<record>')[0]!;
  const rows: string[] = [head];
  for (let i = 0; i < n; i += 1) {
    const ip = `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
    rows.push(
      `<record><row><source_ip>${ip}</source_ip><count>${i + 1}</count><policy_evaluated><disposition>none</disposition>` +
        `<dkim>pass</dkim><spf>fail</spf></policy_evaluated></row><identifiers><header_from>example.com</header_from>` +
        `</identifiers><auth_results><spf><domain>example.com</domain><result>fail</result></spf></auth_results></record>\n`,
    );
  }
  rows.push('</feedback>\n');
  return rows.join('');
}

describe('hostile DMARC reports', () => {
  let zip200: Buffer;
  let gzip200: Buffer;
  let hundredThousand: Buffer;
  beforeAll(async () => {
    zip200 = attached(await zipBomb(200), 'application/zip', 'google.com!example.com!1!2.zip');
    gzip200 = attached(await gzipBomb(200, 1000));
    hundredThousand = attached(gzipSync(manyRecords(100_000)));
  });

  it('a zip bomb (200 MB of one entry that declares 1,000 bytes) is refused as it inflates', async () => {
    expect(zip200.length).toBeLessThan(2 * MB);
    const { answer, ms, grewMb } = await measured(zip200);
    console.log(`zip bomb: ${ms} ms, rss +${grewMb} MB`);
    expect(answer).toEqual({ report: null, reason: 'report_too_large' });
    expect(ms).toBeLessThan(5_000);
    expect(grewMb).toBeLessThan(200);
  });

  it('a gzip bomb (200 MB whose trailer declares 1,000 bytes) is refused as it inflates', async () => {
    const { answer, ms, grewMb } = await measured(gzip200);
    console.log(`gzip bomb: ${ms} ms, rss +${grewMb} MB`);
    expect(answer).toEqual({ report: null, reason: 'report_too_large' });
    expect(ms).toBeLessThan(5_000);
    expect(grewMb).toBeLessThan(200);
  });

  it('a zip that declares 1 GB (in its local header, or in its directory) is refused before anything inflates', async () => {
    const xml = fixture('google.xml');
    const data = Buffer.from(gzipSync(xml).subarray(10, -8)); // gzip's deflate stream is a zip entry's
    const local = zipOf([{ name: 'r.xml', data, method: 8, size: xml.length, localSize: 1024 * MB }]);
    const central = zipOf([{ name: 'r.xml', data, method: 8, size: 1024 * MB }]);
    const stored = zipOf([{ name: 'r.xml', data: xml, method: 0, size: 1024 * MB }]);
    for (const zip of [local, central, stored]) {
      const { answer, ms, grewMb } = await measured(attached(zip, 'application/zip', 'r.zip'));
      expect(answer).toEqual({ report: null, reason: 'report_too_large' });
      expect(ms).toBeLessThan(1_000);
      expect(grewMb).toBeLessThan(50);
    }
    // The same archive honest about its size is read: the refusal was the declared size's.
    const honest = zipOf([{ name: 'r.xml', data, method: 8, size: xml.length }]);
    const read = await parseDmarcMail(attached(honest, 'application/zip', 'r.zip'), BOUNDS);
    expect(read.report?.reportId).toBe('12867901923574626263');
    // A compressed size that points past the archive is not followed.
    const past = zipOf([{ name: 'r.xml', data, method: 8, size: xml.length }]);
    past.writeUInt32LE(1024 * MB, past.length - 22 - 46 - 5 + 20);
    expect(await parseDmarcMail(attached(past, 'application/zip', 'r.zip'), BOUNDS)).toEqual({
      report: null,
      reason: 'bad_archive',
    });
  });

  it('an XML billion-laughs is refused at its DOCTYPE, before any parser reads it', async () => {
    const lol = [
      '<?xml version="1.0"?>',
      '<!DOCTYPE feedback [',
      ' <!ENTITY lol "lol">',
      ...Array.from({ length: 9 }, (_, i) => ` <!ENTITY lol${i + 1} "${`&lol${i || ''};`.repeat(10)}">`),
      ']>',
      '<feedback><report_metadata><org_name>&lol9;</org_name><report_id>1</report_id></report_metadata></feedback>',
    ].join('\n');
    for (const raw of [attached(gzipSync(lol)), attached(Buffer.from(lol), 'text/xml', 'r.xml')]) {
      const { answer, ms } = await measured(raw);
      expect(answer).toEqual({ report: null, reason: 'doctype_refused' });
      expect(ms).toBeLessThan(1_000);
    }
    // A DOCTYPE after a comment is found as well; a `<!DOCTYPE` inside a comment is only a comment.
    const later = fixture('yahoo.xml').toString().replace('<feedback>', '<!-- x --><!DOCTYPE feedback><feedback>');
    expect(await parseDmarcMail(attached(gzipSync(later)), BOUNDS)).toEqual({
      report: null,
      reason: 'doctype_refused',
    });
    const commented = fixture('yahoo.xml').toString().replace('<feedback>', '<!-- <!DOCTYPE x> <record> --><feedback>');
    expect((await parseDmarcMail(attached(gzipSync(commented)), BOUNDS)).report?.records).toHaveLength(2);
  });

  it('100,000 records: past REPORT_MAX_BYTES refused; within a larger byte bound, the first 10,000 kept and marked truncated', async () => {
    const refused = await measured(hundredThousand);
    console.log(`100,000 records, 20 MiB bound: ${refused.ms} ms, rss +${refused.grewMb} MB`);
    expect(refused.answer).toEqual({ report: null, reason: 'report_too_large' });
    const { answer, ms, grewMb } = await measured(hundredThousand, { maxBytes: 64 * MB, maxRecords: 10_000 });
    console.log(`100,000 records, 64 MiB bound: ${ms} ms (truncated to 10,000), rss +${grewMb} MB`);
    expect(grewMb).toBeLessThan(200);
    const report = answer.report!;
    expect(report.truncated).toBe(true);
    expect(report.records).toHaveLength(10_000);
    expect(report.records[0]).toMatchObject({ sourceIp: '10.0.0.0', count: 1, dkimAligned: true, spfAligned: false });
    expect(report.records[9_999]).toMatchObject({ sourceIp: '10.0.39.15', count: 10_000 });
    expect(report.reportId).toBe('1764288000.712340');
  });

  it('a document padded with elements no record explains is refused before it is parsed', async () => {
    const padded = fixture('yahoo.xml')
      .toString()
      .replace('<report_metadata>', `<report_metadata>${'<x/>'.repeat(200_000)}`);
    const { answer, ms } = await measured(attached(gzipSync(padded)));
    expect(answer).toEqual({ report: null, reason: 'too_many_elements' });
    expect(ms).toBeLessThan(2_000);
  });

  describe('through the parse pool', () => {
    let pool: ParsePool;
    beforeAll(() => {
      pool = createParsePool({ threads: 1, timeoutMs: 10_000, memoryMb: 256 });
    });
    afterAll(async () => {
      await pool.close();
    });

    it('a zip bomb handed to the pool comes back refused well within its budget; a real report comes back whole', async () => {
      const started = performance.now();
      const answer = await pool.run('parseDmarcReport', { raw: zip200, bounds: BOUNDS });
      const ms = Math.round(performance.now() - started);
      console.log(`zip bomb through the pool: ${ms} ms`);
      expect(answer).toEqual({ report: null, reason: 'report_too_large' });
      expect(ms).toBeLessThan(10_000);
      const truncated = await pool.run('parseDmarcReport', {
        raw: hundredThousand,
        bounds: { maxBytes: 64 * MB, maxRecords: 10_000 },
      });
      expect(truncated.report?.records).toHaveLength(10_000);
      const google = attached(gzipSync(fixture('google.xml')));
      expect(await pool.run('parseDmarcReport', { raw: google, bounds: BOUNDS })).toEqual(
        await parseDmarcMail(google, BOUNDS),
      );
    });
  });
});
