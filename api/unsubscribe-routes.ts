import type { Express, Response } from 'express';
import type { Core } from '../core/index.js';

const escape = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
const page = (res: Response, status: number, title: string, body: string) =>
  res.status(status).type('html').set({
    'Cache-Control': 'no-store',
    'Content-Security-Policy':
      "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'",
    'Referrer-Policy': 'no-referrer',
    'X-Frame-Options': 'DENY',
  }).send(`<!doctype html><html><head><meta charset="utf-8"><title>${title}</title></head>
<body style="font-family:sans-serif;max-width:32rem;margin:4rem auto"><h1>${title}</h1>${body}</body></html>`);

/**
 * Broadcast unsubscribe links. GET shows a confirmation page (link scanners fetch GETs, so GET changes
 * nothing); POST is RFC 8058 one-click (`List-Unsubscribe=One-Click`): unsubscribes at once, no cookie,
 * no redirect. The token is opaque and signed; it names the contact.
 */
export function mountUnsubscribeRoutes(app: Express, core: Pick<Core, 'contacts' | 'unsubscribe'>): void {
  app.get('/unsubscribe/:token', async (req, res) => {
    const contactId = core.unsubscribe.contactOf(req.params.token);
    const contact = contactId ? await core.contacts.byId(contactId) : undefined;
    if (!contactId) return page(res, 404, 'Link not valid', '<p>This unsubscribe link is not valid.</p>');
    const who = contact ? ` for <b>${escape(contact.email)}</b>` : '';
    page(
      res,
      200,
      'Unsubscribe',
      `<p>Stop receiving these emails${who}?</p>
<form method="post"><input type="hidden" name="List-Unsubscribe" value="One-Click"><button type="submit">Unsubscribe</button></form>`,
    );
  });

  app.post('/unsubscribe/:token', async (req, res) => {
    const contactId = core.unsubscribe.contactOf(req.params.token);
    if (!contactId) return page(res, 404, 'Link not valid', '<p>This unsubscribe link is not valid.</p>');
    await core.contacts.unsubscribe(contactId);
    page(res, 200, 'Unsubscribed', '<p>You are unsubscribed and will not receive these emails any more.</p>');
  });
}
