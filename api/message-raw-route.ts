import type { Express } from 'express';
import type { Core } from '../core/index.js';
import { SEALED_TYPES } from '../core/sending/messages.js';
import { rawMessage } from './ops/messages.js';
import { contextFor } from './rest.js';

/**
 * `GET /api/messages/:id/raw` with `Accept: application/octet-stream` (or the copy's own type): the stored bytes
 * themselves, typed by what they are (the RSA-OAEP-256 envelope is JSON); JSON otherwise, from the operation.
 */
export function mountMessageRaw(app: Express, core: Core): void {
  app.get('/api/messages/:id/raw', async (req, res, next) => {
    const wanted = req.accepts(['application/json', 'application/octet-stream', 'message/rfc822']);
    if (wanted !== 'application/octet-stream' && wanted !== 'message/rfc822') return next();
    const parsed = rawMessage.params!.safeParse(req.params);
    if (!parsed.success) return next();
    const { actor } = await contextFor(rawMessage, req, core);
    const copy = await core.messages.raw(actor, parsed.data.id);
    const type = copy.encrypted ? (SEALED_TYPES[copy.alg ?? ''] ?? 'application/octet-stream') : 'message/rfc822';
    res.status(200).type(type).send(copy.raw);
  });
}
