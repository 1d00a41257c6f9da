import type { Express } from 'express';
import { forbidden, notFound } from '../core/errors.js';
import type { Core } from '../core/index.js';
import { PIXEL_GIF } from '../core/render/tracking.js';

/** Open pixel and click redirect: verify the signature, record the event, answer the GIF or a 302. */
export function mountTrackingRoutes(app: Express, core: Pick<Core, 'events' | 'tracking'>): void {
  const record = (messageId: string, type: 'email.opened' | 'email.clicked', data: Record<string, unknown>) =>
    core.events.recordForMessage(messageId, type, data);

  app.get('/t/o/:file', async (req, res) => {
    const messageId = req.params.file.replace(/\.gif$/, '');
    const sig = typeof req.query.s === 'string' ? req.query.s : '';
    if (core.tracking.verifyOpen(messageId, sig))
      await record(messageId, 'email.opened', { open: { userAgent: req.get('user-agent') ?? null, ip: req.ip } });
    res.set({ 'Cache-Control': 'no-store, max-age=0', 'Content-Type': 'image/gif' }).send(PIXEL_GIF);
  });

  app.get('/t/c/:messageId', async (req, res) => {
    const url = typeof req.query.u === 'string' ? req.query.u : '';
    const sig = typeof req.query.s === 'string' ? req.query.s : '';
    if (!/^https?:\/\//i.test(url) || !core.tracking.verifyClick(req.params.messageId, url, sig))
      throw forbidden('This tracking link is invalid', 'invalid_signature');
    if (
      !(await record(req.params.messageId, 'email.clicked', {
        click: { url, userAgent: req.get('user-agent') ?? null, ip: req.ip },
      }))
    )
      throw notFound('Unknown message');
    res.set('Cache-Control', 'no-store').redirect(302, url);
  });
}
