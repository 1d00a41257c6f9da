import { and, eq, inArray, lt } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { badRequest, forbidden, gone } from '../errors.js';
import { randomToken } from '../ids.js';
import { deriveKey, hmacHex, safeEqual } from '../secrets.js';
import { attachmentTooLarge, fetchRemote, parseHttpUrl } from './fetch-remote.js';
import type { StorageQuota } from '../storage/quota.js';

/** SPEC.md, Limits: 25 MB for any one file, from any source, and for all attachments of one send. */
export const MAX_ATTACHMENT_BYTES = 25 * 1024 * 1024;
export const RETENTION_DAYS = [7, 30, 90, 365] as const;
export type RetentionDays = (typeof RETENTION_DAYS)[number];
const DAY_MS = 86_400_000;

type Common = { filename?: string; contentType?: string; retentionDays?: RetentionDays };
export type UploadInput =
  (Common & { url?: string; content?: string; path?: string }) | (Common & { raw: Buffer; filename: string });
export type UploadedFile = {
  id: string;
  url: string;
  filename: string;
  contentType: string;
  size: number;
  expiresAt: string;
};
/** One entry of a send's `attachments` (SPEC.md, POST /v1/send). */
/** `cid` (an inline part's Content-ID) is set only by the submission server; the API's schema has no such field. */
export type AttachmentSpec = { filename: string; url?: string; content?: string; contentType?: string; cid?: string };
/** What the send path keeps until delivery: a URL fetched then, or a file stored now. */
export type PreparedAttachment = { filename: string; contentType: string; url?: string; fileId?: string; cid?: string };
export type LoadedAttachment = { filename: string; contentType: string; content: Buffer; cid?: string };
export type StoredFile = typeof schema.storedFiles.$inferSelect;

const files = schema.storedFiles;
const OCTET = 'application/octet-stream';
const MIME_BY_EXT: Record<string, string> = {
  pdf: 'application/pdf',
  png: 'image/png',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  gif: 'image/gif',
  webp: 'image/webp',
  svg: 'image/svg+xml',
  txt: 'text/plain',
  csv: 'text/csv',
  html: 'text/html',
  htm: 'text/html',
  md: 'text/markdown',
  json: 'application/json',
  xml: 'application/xml',
  zip: 'application/zip',
  gz: 'application/gzip',
  ics: 'text/calendar',
  doc: 'application/msword',
  docx: 'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
  xls: 'application/vnd.ms-excel',
  xlsx: 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
  ppt: 'application/vnd.ms-powerpoint',
  pptx: 'application/vnd.openxmlformats-officedocument.presentationml.presentation',
  mp3: 'audio/mpeg',
  mp4: 'video/mp4',
  eml: 'message/rfc822',
};

/**
 * Stored attachments (table stored_files) and their signed, time-limited download URLs; also the
 * send path's validation (at accept time) and loading (at delivery time) of `attachments[]`.
 */
export function createAttachmentService(deps: {
  db: Db;
  publicUrl: string;
  secretKey: string;
  allowPrivate: boolean;
  storage?: StorageQuota;
}) {
  const { db } = deps;
  const urlKey = deriveKey(deps.secretKey, 'attachment-url-v1');
  const sign = (id: string, expires: string) => hmacHex(urlKey, `${id}.${expires}`);

  /** Bytes of a URL: one of our own signed links is read from the database, anything else fetched. */
  async function bytesOfUrl(url: string): Promise<{ content: Buffer; contentType?: string; filename?: string }> {
    const own = ownLink(url, deps.publicUrl);
    if (own) {
      const row = await service.verifyDownload(own.id, own.expires, own.sig);
      return { content: row.content, contentType: row.contentType, filename: row.filename };
    }
    const fetched = await fetchRemote(url, { maxBytes: MAX_ATTACHMENT_BYTES, allowPrivate: deps.allowPrivate });
    return { content: fetched.content, contentType: fetched.contentType, filename: fetched.filename };
  }

  /** Inserts one file within the account's storage quota (413 storage_quota_exceeded over it); answers its row without the bytes. */
  async function store(
    userId: string,
    f: { filename: string; contentType: string; content: Buffer },
    expiresAt: number,
  ) {
    return db.transaction(async (tx) => {
      await deps.storage?.reserve(tx, userId, f.content.length);
      const [row] = await tx
        .insert(files)
        .values({
          id: newFileId(),
          userId,
          filename: f.filename,
          contentType: f.contentType,
          size: f.content.length,
          content: f.content,
          createdAt: Date.now(),
          expiresAt,
        })
        .returning({
          id: files.id,
          filename: files.filename,
          contentType: files.contentType,
          size: files.size,
          expiresAt: files.expiresAt,
        });
      return row!;
    });
  }

  const service = {
    /** Stores one file from content, url or raw bytes (exactly one) and answers its signed URL. Not idempotent: each call stores a new file. */
    async upload(userId: string, input: UploadInput): Promise<UploadedFile> {
      const retentionDays = input.retentionDays ?? 7;
      if (!RETENTION_DAYS.includes(retentionDays))
        throw badRequest('retentionDays must be one of 7, 30, 90 or 365', 'validation_error');
      const explicitType = checkContentType(input.contentType);
      const source = await readSource(input, bytesOfUrl);
      const filename =
        cleanFilename(input.filename) ?? cleanFilename(source.filename) ?? (source.fromUrl ? 'attachment' : undefined);
      if (!filename) throw badRequest('filename is required when uploading content', 'filename_required');
      const contentType = explicitType ?? specific(source.contentType) ?? typeOfName(filename);
      const row = await store(
        userId,
        { filename, contentType, content: source.content },
        Date.now() + retentionDays * DAY_MS,
      );
      return {
        id: row.id,
        url: service.signedUrl(row.id, row.filename, row.expiresAt),
        filename: row.filename,
        contentType: row.contentType,
        size: row.size,
        expiresAt: new Date(row.expiresAt).toISOString(),
      };
    },

    /** The public download URL of a stored file, valid until `expiresAt` (ms epoch). Pure. */
    signedUrl(id: string, filename: string, expiresAt: number): string {
      const expires = String(Math.floor(expiresAt));
      return `${deps.publicUrl}/v1/attachments/${encodeURIComponent(id)}/${encodeURIComponent(filename)}?expires=${expires}&sig=${sign(id, expires)}`;
    },

    /** Checks a download link (signature first, so any tampering is 403; then expiry, 410) and reads the file. Read-only. */
    async verifyDownload(id: string, expires: unknown, sig: unknown): Promise<StoredFile> {
      const exp = typeof expires === 'string' ? expires : typeof expires === 'number' ? String(expires) : '';
      if (typeof sig !== 'string' || !/^\d{1,16}$/.test(exp) || !safeEqual(sig, sign(id, exp))) {
        throw forbidden('This attachment link is not valid (bad or missing signature)', 'invalid_signature');
      }
      const now = Date.now();
      if (Number(exp) < now) throw gone('This attachment link has expired', 'link_expired');
      const [row] = await db.select().from(files).where(eq(files.id, id));
      if (!row || row.expiresAt < now) throw gone('This attachment is no longer stored', 'link_expired');
      return row;
    },

    /**
     * Send path, at accept time: validates `attachments[]` (total 25 MB) and stores inline content now
     * (kept 7 days past `keepUntil`, e.g. a scheduled time), so delivery never carries base64 around.
     */
    async prepareForSend(
      userId: string,
      specs: readonly AttachmentSpec[],
      opts: { keepUntil?: number } = {},
    ): Promise<PreparedAttachment[]> {
      const checked = specs.map(checkSpec);
      const total = checked.reduce((n, c) => n + (c.bytes?.length ?? 0), 0);
      if (total > MAX_ATTACHMENT_BYTES) throw attachmentTooLarge(MAX_ATTACHMENT_BYTES);
      const expiresAt = Math.max(Date.now(), opts.keepUntil ?? 0) + 7 * DAY_MS;
      const prepared: PreparedAttachment[] = [];
      for (const c of checked) {
        const cid = c.cid ? { cid: c.cid } : {};
        if (!c.bytes) prepared.push({ filename: c.filename, contentType: c.contentType, url: c.url!, ...cid });
        else
          prepared.push({
            filename: c.filename,
            contentType: c.contentType,
            fileId: (await store(userId, { ...c, content: c.bytes }, expiresAt)).id,
            ...cid,
          });
      }
      return prepared;
    },

    /** Send path, at delivery time: the bytes of one prepared attachment (fetches its URL now). Read-only; safe to retry. */
    async loadForSend(userId: string, spec: PreparedAttachment): Promise<LoadedAttachment> {
      if (spec.fileId) {
        const [row] = await db
          .select()
          .from(files)
          .where(and(eq(files.id, spec.fileId), eq(files.userId, userId)));
        if (!row) throw gone(`Attachment ${spec.filename} is no longer stored`, 'attachment_expired');
        return {
          filename: spec.filename,
          contentType: spec.contentType,
          content: row.content,
          ...(spec.cid ? { cid: spec.cid } : {}),
        };
      }
      if (!spec.url) throw badRequest(`Attachment ${spec.filename} has neither url nor content`, 'invalid_attachment');
      const fetched = await bytesOfUrl(spec.url);
      const contentType = spec.contentType === OCTET ? (specific(fetched.contentType) ?? OCTET) : spec.contentType;
      return { filename: spec.filename, contentType, content: fetched.content, ...(spec.cid ? { cid: spec.cid } : {}) };
    },

    /** Deletes up to `limit` files past their retention; answers how many. Idempotent. */
    async deleteExpired(now = Date.now(), limit = 500): Promise<number> {
      const expired = db.select({ id: files.id }).from(files).where(lt(files.expiresAt, now)).limit(limit);
      const deleted = await db.delete(files).where(inArray(files.id, expired)).returning({ id: files.id });
      return deleted.length;
    },
  };
  return service;
}
export type AttachmentService = ReturnType<typeof createAttachmentService>;

type Source = { content: Buffer; contentType?: string; filename?: string; fromUrl: boolean };

/** Exactly one of raw bytes, content, url; `path` is refused because the server never reads its own disk for a caller. */
async function readSource(
  input: UploadInput,
  bytesOfUrl: (url: string) => Promise<Omit<Source, 'fromUrl'>>,
): Promise<Source> {
  const given = (['raw', 'content', 'url', 'path'] as const).filter(
    (k) => k in input && (input as Record<string, unknown>)[k] !== undefined,
  );
  if (given.length === 0)
    throw badRequest(
      'Give the file as one of content (base64), url, or the raw request body with ?filename=',
      'missing_source',
    );
  if (given.length > 1)
    throw badRequest(`Give exactly one of content, url or path (got ${given.join(', ')})`, 'multiple_sources');
  if ('raw' in input) return { content: capped(input.raw), fromUrl: false };
  if (input.path !== undefined) {
    throw badRequest(
      'path is not supported: the server never reads its own disk for a caller; upload the bytes with content or the raw body',
      'path_not_supported',
    );
  }
  if (input.content !== undefined) return { content: decodeBase64(input.content, 'content'), fromUrl: false };
  return { ...(await bytesOfUrl(input.url!)), fromUrl: true };
}

type CheckedSpec = { filename: string; contentType: string; url?: string; bytes?: Buffer; cid?: string };

function checkSpec(spec: AttachmentSpec, i: number): CheckedSpec {
  const where = `attachments[${i}]`;
  const filename = cleanFilename(spec.filename);
  if (!filename) throw badRequest(`${where}.filename is required`, 'invalid_attachment');
  if ((spec.url === undefined) === (spec.content === undefined))
    throw badRequest(`${where}: give exactly one of url or content`, 'invalid_attachment');
  const contentType = checkContentType(spec.contentType, where) ?? typeOfName(filename);
  const cid = spec.cid ? { cid: spec.cid } : {};
  if (spec.content !== undefined)
    return { filename, contentType, bytes: decodeBase64(spec.content, `${where}.content`), ...cid };
  try {
    parseHttpUrl(spec.url!);
  } catch (err) {
    throw badRequest(`${where}.url: ${(err as Error).message}`, 'invalid_attachment');
  }
  return { filename, contentType, url: spec.url!, ...cid };
}

/** Strict base64 (standard or URL-safe alphabet, whitespace ignored), with the size cap checked before decoding. */
function decodeBase64(content: string, field: string): Buffer {
  const s = content.replace(/\s+/g, '');
  const unpadded = s.replace(/={1,2}$/, '');
  if (!/^[A-Za-z0-9+/_-]*$/.test(unpadded) || unpadded.length % 4 === 1 || (s !== unpadded && s.length % 4 !== 0)) {
    throw badRequest(`${field} is not valid base64`, 'invalid_base64');
  }
  if (Math.floor((unpadded.length * 3) / 4) > MAX_ATTACHMENT_BYTES) throw attachmentTooLarge(MAX_ATTACHMENT_BYTES);
  return Buffer.from(unpadded, 'base64');
}

function capped(bytes: Buffer): Buffer {
  if (bytes.length > MAX_ATTACHMENT_BYTES) throw attachmentTooLarge(MAX_ATTACHMENT_BYTES);
  return bytes;
}

/** A display name only: no directories, no control characters, at most 255 characters. */
function cleanFilename(name: string | undefined): string | undefined {
  const base = name
    ?.split(/[/\\]/)
    .pop()
    // eslint-disable-next-line no-control-regex -- control characters are what it removes
    ?.replace(/[\u0000-\u001f\u007f]/g, '')
    .trim();
  if (!base || base === '.' || base === '..') return undefined;
  return [...base].slice(0, 255).join('');
}

function checkContentType(value: string | undefined, where = 'contentType'): string | undefined {
  if (value === undefined) return undefined;
  const v = value.trim();
  if (v.length > 255 || !/^[\w!#$&^.+-]+\/[\w!#$&^.+-]+(\s*;[^\r\n]*)?$/.test(v)) {
    throw badRequest(
      `${where === 'contentType' ? where : `${where}.contentType`} must be a media type such as application/pdf`,
      'invalid_content_type',
    );
  }
  return v;
}

/** A fetched type is used only when it says more than "some bytes". */
const specific = (type: string | undefined) => (type && !type.toLowerCase().startsWith(OCTET) ? type : undefined);
const typeOfName = (filename: string) => MIME_BY_EXT[filename.split('.').pop()?.toLowerCase() ?? ''] ?? OCTET;
const newFileId = () => `file_${randomToken(18)}`;

/** `{id, expires, sig}` when `url` is one of this service's own download links. */
function ownLink(url: string, publicUrl: string): { id: string; expires: string; sig: string } | undefined {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return undefined;
  }
  const base = new URL(`${publicUrl}/v1/attachments/`);
  if (u.origin !== base.origin || !u.pathname.startsWith(base.pathname)) return undefined;
  const id = u.pathname.slice(base.pathname.length).split('/')[0];
  if (!id || !/^[\w-]+$/.test(id)) return undefined;
  return { id, expires: u.searchParams.get('expires') ?? '', sig: u.searchParams.get('sig') ?? '' };
}
