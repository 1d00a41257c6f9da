import { deriveKey, hmacHex, safeEqual } from '../secrets.js';

const ANCHOR_HREF = /(<a\b[^>]*?\bhref\s*=\s*)(["'])(https?:\/\/[^"'\s>]+)\2/gi;
const decodeAttr = (s: string) => s.replace(/&amp;/g, '&').replace(/&#38;/g, '&');
const encodeAttr = (s: string) => s.replace(/&/g, '&amp;').replace(/"/g, '&quot;');

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
    clickUrl,
    pixelUrl,
    verifyClick: (messageId: string, url: string, sig: string) => safeEqual(sign('click', messageId, url), sig),
    verifyOpen: (messageId: string, sig: string) => safeEqual(sign('open', messageId), sig),

    /** Rewrites http(s) links to the click redirect and/or appends the open pixel. */
    instrumentHtml(html: string, messageId: string, o: { opens: boolean; clicks: boolean }): string {
      let out = html;
      if (o.clicks) out = out.replace(ANCHOR_HREF, (_m, pre: string, q: string, url: string) => `${pre}${q}${encodeAttr(clickUrl(messageId, decodeAttr(url)))}${q}`);
      if (o.opens) {
        const pixel = `<img src="${encodeAttr(pixelUrl(messageId))}" width="1" height="1" alt="" style="display:none;border:0">`;
        out = /<\/body>/i.test(out) ? out.replace(/<\/body>/i, `${pixel}</body>`) : out + pixel;
      }
      return out;
    },
  };
}
export type Tracking = ReturnType<typeof createTracking>;

/** The 1×1 transparent GIF the open pixel answers. */
export const PIXEL_GIF = Buffer.from('R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7', 'base64');
