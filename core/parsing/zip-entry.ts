import { ReportRefusal } from './report-refusal.js';

/**
 * One entry of a zip archive, read from its central directory (PKWARE APPNOTE 4.3): the first entry whose
 * name ends with `ext`, or the only entry. The sizes an archive declares are never trusted to allocate: a
 * declared size past `maxBytes` is refused at once, and a small one is held to the bound as the entry inflates.
 */

/** Most entries an archive may list: a report zip holds one file. */
export const MAX_ZIP_ENTRIES = 16;
const EOCD = 0x06054b50;
const CENTRAL = 0x02014b50;
const LOCAL = 0x04034b50;

type Entry = { name: string; flags: number; method: number; compressed: number; size: number; offset: number };
type Inflater = (bytes: Uint8Array, maxBytes: number) => Uint8Array;

export function readZipEntry(bytes: Uint8Array, ext: string, maxBytes: number, inflate: Inflater): Uint8Array {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const entries = centralDirectory(view);
  const files = entries.filter((e) => !e.name.endsWith('/'));
  const entry = files.find((e) => e.name.toLowerCase().endsWith(ext)) ?? (files.length === 1 ? files[0] : undefined);
  if (!entry) throw new ReportRefusal('not_a_report');
  if (entry.flags & 1) throw new ReportRefusal('bad_archive'); // encrypted
  if (entry.size > maxBytes) throw new ReportRefusal('report_too_large');
  const at = entry.offset;
  if (at + 30 > view.byteLength || view.getUint32(at, true) !== LOCAL) throw new ReportRefusal('bad_archive');
  // The local header may declare its own size (it disagrees with the directory only in a crafted archive).
  if (!(view.getUint16(at + 6, true) & 8) && view.getUint32(at + 22, true) > maxBytes)
    throw new ReportRefusal('report_too_large');
  const start = at + 30 + view.getUint16(at + 26, true) + view.getUint16(at + 28, true);
  const end = start + entry.compressed;
  if (end > view.byteLength) throw new ReportRefusal('bad_archive');
  const data = bytes.subarray(start, end);
  if (entry.method === 0) {
    if (data.length > maxBytes) throw new ReportRefusal('report_too_large');
    return data;
  }
  if (entry.method === 8) return inflate(data, maxBytes);
  throw new ReportRefusal('bad_archive');
}

/** The entries the end-of-central-directory record points at; more than MAX_ZIP_ENTRIES is refused. */
function centralDirectory(view: DataView): Entry[] {
  const eocd = findEnd(view);
  const count = view.getUint16(eocd + 10, true);
  if (count > MAX_ZIP_ENTRIES) throw new ReportRefusal('too_many_entries');
  const entries: Entry[] = [];
  let at = view.getUint32(eocd + 16, true);
  for (let i = 0; i < count; i += 1) {
    if (at + 46 > view.byteLength || view.getUint32(at, true) !== CENTRAL) throw new ReportRefusal('bad_archive');
    const nameLength = view.getUint16(at + 28, true);
    const next = at + 46 + nameLength + view.getUint16(at + 30, true) + view.getUint16(at + 32, true);
    if (next > view.byteLength) throw new ReportRefusal('bad_archive');
    const name = new TextDecoder().decode(new Uint8Array(view.buffer, view.byteOffset + at + 46, nameLength));
    entries.push({
      name,
      flags: view.getUint16(at + 8, true),
      method: view.getUint16(at + 10, true),
      compressed: view.getUint32(at + 20, true),
      size: view.getUint32(at + 24, true),
      offset: view.getUint32(at + 42, true),
    });
    at = next;
  }
  return entries;
}

/** The end-of-central-directory record: 22 bytes and a comment of at most 65,535 at the archive's end. */
function findEnd(view: DataView): number {
  const last = view.byteLength - 22;
  for (let at = last; at >= 0 && at >= last - 65_535; at -= 1) {
    if (view.getUint32(at, true) === EOCD) return at;
  }
  throw new ReportRefusal('bad_archive');
}
