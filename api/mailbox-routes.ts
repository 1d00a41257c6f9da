import type { Express } from 'express';
import type { Core } from '../core/index.js';
import { rawMailboxMessage } from './ops/mailbox.js';
import { contextFor } from './rest.js';

/** `GET /api/mailbox/messages/:uid/raw` with `Accept: message/rfc822`: the bytes themselves (JSON otherwise, from the operation). */
export function mountMailboxRaw(app: Express, core: Core): void {
  app.get('/api/mailbox/messages/:uid/raw', async (req, res, next) => {
    if (req.accepts(['application/json', 'message/rfc822']) !== 'message/rfc822') return next();
    const parsed = rawMailboxMessage.params!.safeParse(req.params);
    if (!parsed.success) return next();
    const { principal } = await contextFor(rawMailboxMessage, req, core);
    const { row } = await core.mailboxes.message(principal.scope, parsed.data.uid);
    res.status(200).type('message/rfc822').send(row.raw);
  });
}
