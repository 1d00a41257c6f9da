import { deriveKey, hmacHex, safeEqual } from '../secrets.js';
import { encodeAttr, rewriteLinks } from './html-links.js';

/**
 * Open and click tracking: signed pixel and redirect URLs. The click signature covers the message
 * and the exact destination, so a tracking link cannot be turned into an open redirect.
 */
export function createTracking(opts: { publicUrl: string; secretKey: string }) {
  const key = deriveKey(opts.secretKey, 'tracking-v1');
  const sign = (...parts: string[]) => hmacHex(key, parts.join('\n')).slice(0, 32);
  const clickUrl = (messageId: string, url: string) =>
    `${opts.publicUrl}/t/c/${messageId}?u=${encodeURIComponent(url)}&s=${sign('click', messageId, url)}`;
  const pixelUrl = (messageId: string) => `${opts.publicUrl}/t/o/${messageId}.gif?s=${sign('open', messageId)}`;

  return {
    /** The settings it was made with: the parse pool's render task rebuilds the same tracking in its thread. */
    options: { publicUrl: opts.publicUrl, secretKey: opts.secretKey },
    clickUrl,
    pixelUrl,
    verifyClick: (messageId: string, url: string, sig: string) => safeEqual(sign('click', messageId, url), sig),
    verifyOpen: (messageId: string, sig: string) => safeEqual(sign('open', messageId), sig),

    /**
     * Rewrites http(s) links to the click redirect and/or puts the open pixel before `</body>` (else at
     * the end). One pass of a real HTML tokenizer: linear in the input, whatever the input is.
     */
    instrumentHtml(html: string, messageId: string, o: { opens: boolean; clicks: boolean }): string {
      if (!o.clicks && !o.opens) return html;
      const r = rewriteLinks(html, (url) => (o.clicks ? clickUrl(messageId, url) : url));
      const out = o.clicks ? r.html : html;
      if (!o.opens) return out;
      const pixel = `<img src="${encodeAttr(pixelUrl(messageId))}" width="1" height="1" alt="" style="display:none;border:0">`;
      return r.bodyEnd === undefined ? out + pixel : out.slice(0, r.bodyEnd) + pixel + out.slice(r.bodyEnd);
    },
  };
}
export type Tracking = ReturnType<typeof createTracking>;

/** The 1×1 transparent GIF the open pixel answers. */
export const PIXEL_GIF = Buffer.from('R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7', 'base64');
