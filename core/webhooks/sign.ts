import { createHmac } from 'node:crypto';
import { randomToken } from '../ids.js';

export const newWebhookSecret = () => `whsec_${randomToken(24)}`;

/**
 * DESIGN.md signature: HMAC-SHA256 keyed with the full `whsec_…` string (its UTF-8 bytes) over
 * `"<t>." + body`, hex; sent as `x-svc-signature: t=<ms>,v1=<hex>` with `x-svc-timestamp: <ms>`.
 */
export function signatureHeaders(secret: string, body: string, t = Date.now()): Record<string, string> {
  const v1 = createHmac('sha256', secret).update(`${t}.${body}`).digest('hex');
  return { 'x-svc-signature': `t=${t},v1=${v1}`, 'x-svc-timestamp': String(t) };
}
