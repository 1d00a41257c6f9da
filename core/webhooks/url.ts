import type { Resolver } from 'node:dns/promises';
import { badRequest, isAppError } from '../errors.js';
import { resolveAllowed } from '../net/address-guard.js';

const LOOPBACK = /^(localhost|127(?:\.\d{1,3}){3}|\[::1\])$/i;

/**
 * Where outbound HTTP may go: DNS through DNS_SERVERS, private ranges only with ALLOW_PRIVATE_NETWORKS;
 * and how long a webhook POST may take (WEBHOOK_TIMEOUT_MS, 15 s when unset).
 */
export type NetPolicy = { resolver: Resolver; allowPrivate: boolean; webhookTimeoutMs?: number };

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

/**
 * The syntactic rule above, then the destination: a host that resolves to an internal address (loopback,
 * private, link-local, …; loopback and private need ALLOW_PRIVATE_NETWORKS) is refused. A host that does
 * not resolve yet is accepted: every attempt resolves and checks again, and connects to what it checked.
 */
export async function checkWebhookDestination(raw: string, net: NetPolicy): Promise<string> {
  const clean = checkWebhookUrl(raw);
  try {
    await resolveAllowed(new URL(clean).hostname, { ...net, what: 'Webhook host' });
  } catch (err) {
    if (isAppError(err) && err.code === 'destination_blocked') throw badRequest(err.message, 'webhook_url_blocked');
    if (!isAppError(err)) throw err;
  }
  return clean;
}
