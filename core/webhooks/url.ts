import { badRequest } from '../errors.js';

const LOOPBACK = /^(localhost|127(?:\.\d{1,3}){3}|\[::1\])$/i;

/** Webhook URLs must be https, except loopback hosts (localhost, 127.0.0.0/8, [::1]), which may be http. */
export function checkWebhookUrl(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw badRequest(`"${raw}" is not a URL`, 'invalid_webhook_url');
  }
  if (url.username || url.password) throw badRequest('Webhook URLs cannot carry credentials', 'invalid_webhook_url');
  if (url.protocol === 'https:') return url.toString();
  if (url.protocol === 'http:' && LOOPBACK.test(url.hostname)) return url.toString();
  throw badRequest('Webhook URLs must be https (http only for localhost)', 'invalid_webhook_url');
}
