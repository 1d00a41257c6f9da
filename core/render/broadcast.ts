import { composeContent } from './compose.js';
import { escapeHtml, mergeData, type MergeData } from './merge.js';

export type BroadcastContent = {
  subject: string;
  preview: string | null;
  html: string | null;
  text: string | null;
  footerAddress: string | null;
  template?: { subject: string | null; html: string | null; text: string | null };
};
export type Recipient = { email: string; name: string | null; attributes: MergeData };

/**
 * One recipient's copy of a broadcast: merge tags filled from the contact (`{{email}}`, `{{name}}`,
 * `{{first_name}}`, every attribute, `{{unsubscribe_url}}`), the preview text as a hidden first line,
 * and the CAN-SPAM footer (postal address and the unsubscribe link) appended to each body.
 */
export function renderForRecipient(b: BroadcastContent, r: Recipient, unsubscribeUrl: string) {
  const firstName = r.name ? (r.name.trim().split(/\s+/)[0] ?? '') : '';
  const data = mergeData(r.attributes, {
    email: r.email,
    name: r.name ?? '',
    first_name: firstName,
    unsubscribe_url: unsubscribeUrl,
  });
  const content = composeContent(
    { subject: b.subject || undefined, html: b.html ?? undefined, text: b.text ?? undefined },
    b.template,
    data,
  );
  const address = b.footerAddress?.trim();
  let html = content.html;
  if (html !== null) {
    const preview = b.preview
      ? `<div style="display:none;max-height:0;overflow:hidden">${escapeHtml(b.preview)}</div>`
      : '';
    const footer =
      `<div style="margin-top:24px;font-size:12px;color:#666">${address ? `${escapeHtml(address).replace(/\n/g, '<br>')}<br>` : ''}` +
      `<a href="${escapeHtml(unsubscribeUrl)}">Unsubscribe</a></div>`;
    const afterOpen = endOfBodyTag(html);
    html = afterOpen >= 0 ? html.slice(0, afterOpen) + preview + html.slice(afterOpen) : preview + html;
    const close = html.search(/<\/body>/i);
    html =
      close >= 0 ? `${html.slice(0, close)}${footer}</body>${html.slice(close + '</body>'.length)}` : html + footer;
  }
  const text =
    content.text === null
      ? null
      : `${content.text}\n\n--\n${address ? `${address}\n` : ''}Unsubscribe: ${unsubscribeUrl}\n`;
  return { subject: content.subject, html, text };
}

/**
 * Where the first `<body…>` tag ends (ASCII case-insensitive), or -1: two forward searches. The regex
 * `/<body[^>]*>/i` found the same tag in time quadratic in the number of `<body` with no `>` after them.
 */
function endOfBodyTag(html: string): number {
  const open = html.search(/<body/i);
  if (open < 0) return -1;
  const close = html.indexOf('>', open + '<body'.length);
  return close < 0 ? -1 : close + 1;
}
