import { createHash } from 'node:crypto';
import express, { type Express } from 'express';
import { z } from 'zod';
import { MAX_ATTACHMENT_BYTES, RETENTION_DAYS } from '../core/attachments/service.js';
import { badRequest } from '../core/errors.js';
import type { Core } from '../core/index.js';
import type { ContextOf } from './contract.js';
import { validationError } from './errors.js';
import { uploadAttachment } from './ops/attachments.js';
import { contextFor } from './rest.js';
import { headerKey, REPLAYED_HEADER, requestFingerprint } from './idempotency.js';

/** The types the JSON body parser takes; those requests belong to the `attachments.upload` operation. */
const JSON_TYPES = ['application/json', 'application/*+json'];
/** Body types that say nothing about the file itself (curl --data-binary sends form-urlencoded by default). */
const UNTYPED = /^(application\/octet-stream|application\/x-www-form-urlencoded)\b/i;
/** Browsers and proxies may reuse a download for at most this long, and never past the link's expiry. */
const MAX_CACHE_SECONDS = 3600;

const rawQuery = z.object({
  filename: z.string().min(1).max(255).optional(),
  contentType: z.string().min(3).max(255).optional(),
  retentionDays: z.coerce.number().pipe(z.literal(RETENTION_DAYS)).optional(),
});

/**
 * The raw endpoints of attachments (DESIGN.md, api/): upload of raw bytes with `?filename=`, and the
 * signed download. Mount after the JSON parser and before any other body parser and the REST routes.
 */
export function mountAttachmentRoutes(app: Express, core: Core): void {
  const rawBody = express.raw({ type: () => true, limit: MAX_ATTACHMENT_BYTES });

  app.post(
    '/v1/attachments',
    async (req, res, next) => {
      if (req.is(JSON_TYPES)) return next('route');
      // Same credential rules as the operation, checked before 25 MB of body is read for a stranger.
      res.locals.ctx = await contextFor(uploadAttachment, req, core);
      const query = rawQuery.safeParse(req.query);
      if (!query.success) throw validationError(query.error.issues, 'query');
      if (!query.data.filename) {
        throw badRequest('A raw upload needs ?filename=<name> (or send JSON with content or url)', 'filename_required');
      }
      res.locals.query = query.data;
      res.locals.key = headerKey(req);
      next();
    },
    rawBody,
    async (req, res) => {
      const { actor } = res.locals.ctx as ContextOf<typeof uploadAttachment.auth>;
      const query = res.locals.query as z.infer<typeof rawQuery> & { filename: string };
      const raw = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
      if (raw.length === 0)
        throw badRequest('The request body is empty: send the file bytes as the body', 'empty_body');
      const header = req.get('content-type');
      const contentType = query.contentType ?? (header && !UNTYPED.test(header) ? header : undefined);
      const upload = async () => ({
        status: uploadAttachment.status ?? 200,
        body: await core.attachments.upload(actor.userId, {
          raw,
          filename: query.filename,
          ...(contentType ? { contentType } : {}),
          ...(query.retentionDays ? { retentionDays: query.retentionDays } : {}),
        }),
      });
      // An Idempotency-Key works here as on the JSON form: the bytes are fingerprinted by their hash.
      const key = res.locals.key as string | undefined;
      const request = {
        raw: createHash('sha256').update(raw).digest('hex'),
        filename: query.filename,
        contentType: contentType ?? null,
        retentionDays: query.retentionDays ?? null,
      };
      const answer =
        key === undefined
          ? { ...(await upload()), replayed: false }
          : await core.idempotency.run(
              {
                userId: actor.userId,
                key,
                operation: `${uploadAttachment.name}.raw`,
                fingerprint: requestFingerprint(`${uploadAttachment.name}.raw`, actor, request),
              },
              upload,
            );
      if (answer.replayed) res.set(REPLAYED_HEADER, 'true');
      res.status(answer.status).json(answer.body);
    },
  );

  app.get('/v1/attachments/:id/:filename', async (req, res) => {
    const file = await core.attachments.verifyDownload(req.params.id, req.query.expires, req.query.sig);
    const secondsLeft = Math.floor((Number(req.query.expires) - Date.now()) / 1000);
    // setHeader, not res.set: Express would append "; charset=utf-8" to text types, which the stored bytes may not be.
    res.setHeader('Content-Type', file.contentType);
    res
      .set({
        'Content-Disposition': contentDisposition(file.filename),
        'Cache-Control': `private, max-age=${Math.max(0, Math.min(MAX_CACHE_SECONDS, secondsLeft))}`,
        'X-Content-Type-Options': 'nosniff',
        // The bytes are the caller's: never let them run as a page of our origin.
        'Content-Security-Policy': "default-src 'none'; sandbox; frame-ancestors 'none'",
      })
      .send(file.content);
  });
}

/** RFC 6266: an ASCII fallback for old clients, then the exact name as RFC 5987 UTF-8. */
function contentDisposition(filename: string): string {
  const ascii = filename.replace(/[^\x20-\x7e]|["\\]/g, '_');
  const utf8 = encodeURIComponent(filename).replace(/['()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
  return `attachment; filename="${ascii}"; filename*=UTF-8''${utf8}`;
}
