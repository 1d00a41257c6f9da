import { createHash } from 'node:crypto';
import { and, eq, ne } from 'drizzle-orm';
import MailComposer from 'nodemailer/lib/mail-composer';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import type { DomainRow } from '../domains/dto.js';
import { badRequest, conflict, notFound } from '../errors.js';
import { TRACKING_PATTERN } from '../mail/patterns.js';
import { parseMail } from '../parsing/pool.js';
import type { Actor } from '../tenancy.js';
import { bestRoute, looksLikeAddress, type RouteRow } from '../webhooks/routes.js';
import type { InboundService } from './service.js';

export type RouteMessageInput = {
  routeId?: string;
  address?: string;
  from: string;
  subject?: string;
  text?: string;
  html?: string;
};
export type RouteMessageResult = { id: string; routed: boolean; action: RouteRow['action'] };

/** A local part the route's pattern matches: the literal, or for a wildcard the literal with `route` added. */
function localFor(pattern: string): string {
  if (pattern === '*') return 'route';
  if (!pattern.includes('*')) return pattern;
  const literal = pattern.replace('*', '');
  return pattern.endsWith('*') ? `${literal}route` : `route${literal}`;
}

/**
 * `POST /v1/route` (the SDKs' `route()`): a message made from `from`, `subject`, `text` and `html` runs through
 * one of the caller's registered routes as if it had arrived: stored, filed, forwarded or posted to the
 * webhook as the route's action says. Only the caller's routes (a scoped key: its domain's); 404 otherwise.
 */
export function createRouteApi(deps: { db: Db; inbound: Pick<InboundService, 'acceptRouted'> }) {
  const { db } = deps;
  const r = schema.routes;
  const d = schema.domains;

  async function routesOf(domainId: string): Promise<RouteRow[]> {
    return db
      .select()
      .from(r)
      .where(and(eq(r.domainId, domainId), ne(r.pattern, TRACKING_PATTERN)));
  }

  /** The route and the recipient the message is addressed to. */
  async function target(
    actor: Actor,
    input: RouteMessageInput,
  ): Promise<{ domain: DomainRow; route: RouteRow; rcpt: string }> {
    if (input.routeId) {
      const [row] = await db
        .select({ route: r, domain: d })
        .from(r)
        .innerJoin(d, eq(d.id, r.domainId))
        .where(and(eq(r.id, input.routeId), eq(r.userId, actor.userId), eq(d.userId, actor.userId)));
      if (!row || row.route.pattern === TRACKING_PATTERN || (actor.domainId && row.domain.id !== actor.domainId))
        throw notFound('Route not found');
      const local = localFor(row.route.pattern);
      // The delivery step matches recipients again: the address must reach this route, not a more specific one.
      if (bestRoute(await routesOf(row.domain.id), local)?.id !== row.route.id)
        throw conflict(
          `A more specific route of ${row.domain.domain} takes ${local}@; route by address instead`,
          'route_shadowed',
        );
      return { domain: row.domain, route: row.route, rcpt: `${local}@${row.domain.domain}` };
    }
    const address = (input.address ?? '').trim().toLowerCase();
    if (!looksLikeAddress(address)) throw badRequest('Give routeId or an address (local@domain)', 'validation_error');
    const at = address.lastIndexOf('@');
    const [domain] = await db
      .select()
      .from(d)
      .where(and(eq(d.domain, address.slice(at + 1)), eq(d.userId, actor.userId), eq(d.status, 'verified')));
    if (!domain || (actor.domainId && domain.id !== actor.domainId)) throw notFound('No route matches this address');
    const route = bestRoute(await routesOf(domain.id), address.slice(0, at));
    if (!route) throw notFound('No route matches this address');
    return { domain, route, rcpt: address };
  }

  return {
    async route(actor: Actor, input: RouteMessageInput): Promise<RouteMessageResult> {
      const { domain, route, rcpt } = await target(actor, input);
      const raw = await new MailComposer({
        from: input.from,
        to: rcpt,
        subject: input.subject ?? '',
        text: input.text,
        html: input.html,
        headers: { 'X-Routed-By': 'api' },
      })
        .compile()
        .build();
      const mail = await parseMail(raw);
      const from = mail.from?.value[0]?.address;
      if (!from || !looksLikeAddress(from)) throw badRequest('from is not an address', 'validation_error');
      // A `drop` route keeps nothing, as for mail that arrives: the id names the message that was not stored.
      if (route.action === 'drop') {
        const id = `msg_${createHash('sha256').update(raw).digest('base64url').slice(0, 24)}`;
        return { id, routed: true, action: 'drop' };
      }
      // Made here, not received: no SMTP peer, so no SPF, DKIM or DMARC verdict; `source` says where it came from.
      const auth = { spf: null, dkim: null, dmarc: null, spam: null, source: 'api' };
      const env = { from, rcpts: [rcpt], ip: '127.0.0.1', helo: 'api' };
      const id = await deps.inbound.acceptRouted(domain, [{ rcpt, route }], raw, mail, env, auth);
      return { id, routed: true, action: route.action };
    },
  };
}
export type RouteApi = ReturnType<typeof createRouteApi>;
