import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createDeflateRaw, createGzip } from 'node:zlib';

/**
 * Aggregate report mails as reporters send them (DMARC: Google a zip as the whole body, Microsoft and Yahoo
 * a gzip attachment; TLS: RFC 8460 section 5.3), and the archives hostile ones carry: zip entries whose
 * headers declare what the test says, and bombs deflated as a stream (never held inflated in memory).
 */

const FIXTURES = join(import.meta.dirname, '..', 'fixtures', 'reports');
export const reportFixture = (name: string) => readFileSync(join(FIXTURES, name));

export type ReportPart = { type: string; name?: string; content: Buffer | string };

/** A report mail: one part is the whole body; several are a multipart/mixed (or the RFC 8460 multipart/report). */
export function reportMail(opts: { from: string; to: string; subject: string; parts: ReportPart[]; tlsrpt?: boolean }) {
  const head = [
    `From: ${opts.from}`,
    `To: ${opts.to}`,
    `Subject: ${opts.subject}`,
    'Date: Fri, 28 Nov 2026 08:00:00 +0000',
    `Message-ID: <${Math.random().toString(36).slice(2)}@reporter.test>`,
    'MIME-Version: 1.0',
  ];
  if (opts.tlsrpt) head.push('TLS-Report-Domain: example.com', 'TLS-Report-Submitter: reporter.test');
  if (opts.parts.length === 1)
    return Buffer.from([...head, ...partHead(opts.parts[0]!), '', body(opts.parts[0]!)].join('\r\n'));
  const boundary = '----=_Part_0_1234567.1764316800000';
  const type = opts.tlsrpt ? 'multipart/report; report-type=tlsrpt' : 'multipart/mixed';
  const lines = [...head, `Content-Type: ${type}; boundary="${boundary}"`, ''];
  for (const part of opts.parts) lines.push(`--${boundary}`, ...partHead(part), '', body(part));
  lines.push(`--${boundary}--`, '');
  return Buffer.from(lines.join('\r\n'));
}

function partHead(part: ReportPart): string[] {
  if (typeof part.content === 'string')
    return [`Content-Type: ${part.type}; charset=utf-8`, 'Content-Transfer-Encoding: 8bit'];
  const name = part.name ? `; name="${part.name}"` : '';
  return [
    `Content-Type: ${part.type}${name}`,
    'Content-Transfer-Encoding: base64',
    ...(part.name ? [`Content-Disposition: attachment; filename="${part.name}"`] : []),
  ];
}

const body = (part: ReportPart) =>
  typeof part.content === 'string'
    ? part.content
    : (part.content.toString('base64').match(/.{1,76}/g) ?? []).join('\r\n');

export type ZipEntry = {
  name: string;
  data: Buffer;
  /** 0 stored, 8 deflated (data is then already deflated). */
  method: 0 | 8;
  /** The uncompressed size the central directory declares, and the local header (default: the true one). */
  size: number;
  localSize?: number;
};

/** A zip archive written by hand, so a test decides what its headers declare. */
export function zipOf(entries: ZipEntry[]): Buffer {
  const locals: Buffer[] = [];
  const centrals: Buffer[] = [];
  let offset = 0;
  for (const e of entries) {
    const name = Buffer.from(e.name);
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4);
    local.writeUInt16LE(e.method, 8);
    local.writeUInt32LE(e.data.length, 18);
    local.writeUInt32LE(e.localSize ?? e.size, 22);
    local.writeUInt16LE(name.length, 26);
    const central = Buffer.alloc(46);
    central.writeUInt32LE(0x02014b50, 0);
    central.writeUInt16LE(20, 4);
    central.writeUInt16LE(20, 6);
    central.writeUInt16LE(e.method, 10);
    central.writeUInt32LE(e.data.length, 20);
    central.writeUInt32LE(e.size, 24);
    central.writeUInt16LE(name.length, 28);
    central.writeUInt32LE(offset, 42);
    locals.push(local, name, e.data);
    centrals.push(central, name);
    offset += 30 + name.length + e.data.length;
  }
  const directory = Buffer.concat(centrals);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(entries.length, 8);
  end.writeUInt16LE(entries.length, 10);
  end.writeUInt32LE(directory.length, 12);
  end.writeUInt32LE(offset, 16);
  return Buffer.concat([...locals, directory, end]);
}

/** `mb` megabytes of zeros through a streaming compressor: the bomb is a few hundred KB, never held inflated. */
async function compressedZeros(stream: ReturnType<typeof createGzip>, mb: number, prefix = ''): Promise<Buffer> {
  const out: Buffer[] = [];
  stream.on('data', (c: Buffer) => out.push(c));
  const done = new Promise((resolve, reject) => stream.on('end', resolve).on('error', reject));
  const zeros = Buffer.alloc(1024 * 1024, 0x20); // spaces: after the XML prefix the bomb stays well-formed so far
  if (prefix) stream.write(prefix);
  for (let i = 0; i < mb; i += 1) {
    if (!stream.write(zeros)) await new Promise((r) => stream.once('drain', r));
  }
  stream.end();
  await done;
  return Buffer.concat(out);
}

/** A gzip bomb of `mb` MB; with `forgeSize` its trailer declares that many bytes instead. */
export async function gzipBomb(mb: number, forgeSize?: number): Promise<Buffer> {
  const gz = await compressedZeros(createGzip({ level: 9 }), mb, '<?xml version="1.0"?><feedback>');
  if (forgeSize !== undefined) gz.writeUInt32LE(forgeSize, gz.length - 4);
  return gz;
}

/** A zip of one `report.xml` entry that inflates to `mb` MB and declares `declared` bytes. */
export async function zipBomb(mb: number, declared = 1000): Promise<Buffer> {
  const data = await compressedZeros(createDeflateRaw({ level: 9 }), mb, '<?xml version="1.0"?><feedback>');
  return zipOf([{ name: 'report.xml', data, method: 8, size: declared }]);
}
