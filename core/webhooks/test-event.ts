import type { Actor } from '../tenancy.js';
import { newId } from '../ids.js';
import type { WebhookTestPayload } from './payload-schemas.js';
import { postWebhook } from './post.js';
import type { RouteService } from './routes.js';
import type { NetPolicy } from './url.js';

/** POST /api/domains/:id/webhook/test: one signed test event to the catch-all webhook, answered in line. */
export function createWebhookTests(deps: { routes: RouteService; net: NetPolicy }) {
  return {
    async test(actor: Actor, domainId: string) {
      const { domain, route } = await deps.routes.catchAllOf(actor, domainId);
      const now = Date.now();
      const payload: WebhookTestPayload = {
        id: newId('evt'),
        type: 'webhook.test',
        createdAt: now,
        createdAtIso: new Date(now).toISOString(),
        data: { domain: domain.domain },
      };
      const body = JSON.stringify(payload);
      const r = await postWebhook({
        url: route.url,
        body,
        secret: deps.routes.secretOf(route),
        ackMode: route.ackMode,
        net: deps.net,
      });
      return { ok: r.ok, status: r.status ?? 0 };
    },
  };
}
