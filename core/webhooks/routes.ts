import { and, eq, inArray, ne } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { domainDto, type DomainRow } from '../domains/dto.js';
import type { DomainService } from '../domains/service.js';
import type { Actor } from '../tenancy.js';
import { badRequest, conflict, notFound } from '../errors.js';
import { newId } from '../ids.js';
import type { Sealer } from '../secrets.js';
import { patternScore, TRACKING_PATTERN } from '../mail/patterns.js';
import { newWebhookSecret } from './sign.js';
import { receivingConfigChanged } from '../mail/config-changes.js';
import { checkWebhookDestination, type NetPolicy } from './url.js';

export type RouteRow = typeof schema.routes.$inferSelect;
/** Route of a domain's tracking webhook: never matched by an address, signed with the account secret. */
export type RouteAction = 'webhook' | 'forward' | 'store' | 'drop';
const ACTIONS: RouteAction[] = ['webhook', 'forward', 'store', 'drop'];
export type RouteInput = {
  domainId?: string;
  address?: string;
  url?: string;
  ackMode?: 'lenient' | 'ack';
  match?: string;
  action?: string;
  destination?: string;
};
const PATTERN = /^(\*|[a-z0-9._+-]+|[a-z0-9._+-]+\*|\*[a-z0-9._+-]+)$/;

/** The most specific of a domain's routes for a local part (a higher pattern score wins). */
export function bestRoute<T extends { pattern: string }>(rows: T[], local: string): T | undefined {
  let best: { row: T; score: number } | undefined;
  for (const row of rows) {
    const score = patternScore(row.pattern, local.toLowerCase());
    if (score >= 0 && (!best || score > best.score)) best = { row, score };
  }
  return best?.row;
}

/** Routes: the catch-all webhook of a domain and address routes; the most specific match wins. */
export function createRouteService(deps: { db: Db; sealer: Sealer; domains: DomainService; net: NetPolicy }) {
  const { db } = deps;
  const r = schema.routes;

  const inboundReady = (d: DomainRow) => {
    if (d.mxVerified !== 1)
      throw conflict(
        `${d.domain} has no verified MX yet: inbound mail, webhooks and routes need it`,
        'domain_not_verified',
      );
  };
  const routeDto = (row: RouteRow, domain: string) => ({
    id: row.id,
    domain_id: row.domainId,
    domain,
    pattern: row.pattern,
    match_pattern: `${row.pattern}@${domain}`,
    action: row.action,
    destination: row.destination ?? (row.action === 'webhook' ? row.url : null),
    url: row.url,
    ack_mode: row.ackMode,
    signing_secret: deps.sealer.open(row.secretSealed),
    created_at: row.createdAt,
    updated_at: row.updatedAt,
  });

  /** Creates or updates the route of (domain, pattern), keeping its secret across updates. */
  async function upsert(
    d: DomainRow,
    pattern: string,
    url: string,
    ackMode: 'lenient' | 'ack',
    target: { action: RouteAction; destination: string | null } = { action: 'webhook', destination: null },
  ): Promise<{ row: RouteRow; secret: string }> {
    const now = Date.now();
    const [existing] = await db
      .select()
      .from(r)
      .where(and(eq(r.domainId, d.id), eq(r.pattern, pattern)));
    if (existing) {
      const [row] = await db
        .update(r)
        .set({ url, ackMode, ...target, updatedAt: now })
        .where(eq(r.id, existing.id))
        .returning();
      receivingConfigChanged();
      return { row: row!, secret: deps.sealer.open(existing.secretSealed) };
    }
    const secret = newWebhookSecret();
    const [row] = await db
      .insert(r)
      .values({
        id: newId('rte'),
        userId: d.userId,
        domainId: d.id,
        pattern,
        url,
        ackMode,
        ...target,
        secretSealed: deps.sealer.seal(secret),
        createdAt: now,
        updatedAt: now,
      })
      .returning();
    receivingConfigChanged();
    return { row: row!, secret };
  }

  /** Domain and local-part pattern of a route request: `{match}` (address, `*@domain`, `addr+*@domain`, or a local pattern with domainId) or `{domainId, address}`. */
  async function target(actor: Actor, input: RouteInput): Promise<{ d: DomainRow; pattern: string }> {
    const spec = (input.match ?? input.address ?? '').trim().toLowerCase();
    if (!spec) throw badRequest('match (or domainId and address) is required', 'validation_error');
    // Only `match` names a domain after its @; the older `address` is a bare local-part pattern.
    const at = input.match !== undefined ? spec.lastIndexOf('@') : -1;
    let d: DomainRow;
    if (at >= 0) {
      const name = spec.slice(at + 1);
      const [row] = await db
        .select()
        .from(schema.domains)
        .where(and(eq(schema.domains.domain, name), eq(schema.domains.userId, actor.userId)));
      if (!row || (input.domainId && row.id !== input.domainId)) throw notFound(`No domain ${name} on this account`);
      d = await deps.domains.load(actor, row.id);
    } else {
      if (!input.domainId)
        throw badRequest(
          'A local-part pattern needs domainId (or write the match as pattern@domain)',
          'validation_error',
        );
      d = await deps.domains.load(actor, input.domainId);
    }
    const pattern = at >= 0 ? spec.slice(0, at) : spec;
    if (pattern.includes('@') || !PATTERN.test(pattern))
      throw badRequest(
        'The address pattern must be *, a local part, or one wildcard at its start or end (support-*, *-agent, addr+*)',
        'invalid_pattern',
      );
    return { d, pattern };
  }

  async function actionOf(
    d: DomainRow,
    input: RouteInput,
  ): Promise<{ action: RouteAction; destination: string | null; url: string }> {
    const action = input.action ?? 'webhook';
    if (action === 'agent')
      throw badRequest(
        'The agent action is not supported by this service; use webhook, forward, store or drop',
        'unsupported_action',
      );
    if (!ACTIONS.includes(action as RouteAction))
      throw badRequest(`Unknown action "${action}"; use webhook, forward, store or drop`, 'unsupported_action');
    const destination = input.destination ?? input.url;
    if (action === 'webhook') {
      if (!destination) throw badRequest('A webhook route needs destination (or url)', 'validation_error');
      const url = await checkWebhookDestination(destination, deps.net);
      return { action, destination: url, url };
    }
    if (action === 'forward') {
      const addr = (input.destination ?? '').trim().toLowerCase();
      if (addr.length > 254 || !looksLikeAddress(addr))
        throw badRequest('A forward route needs destination: an email address', 'validation_error');
      if (addr.endsWith(`@${d.domain}`)) throw badRequest('Forwarding to the same domain would loop', 'forward_loop');
      return { action, destination: addr, url: '' };
    }
    return { action: action as RouteAction, destination: null, url: '' };
  }

  async function catchAll(d: DomainRow): Promise<RouteRow | undefined> {
    const [row] = await db
      .select()
      .from(r)
      .where(and(eq(r.domainId, d.id), eq(r.pattern, '*'), eq(r.action, 'webhook')));
    return row;
  }

  /** The domain's routes read once, matched against any number of local parts (a batch, a message's recipients). */
  async function matcher(domainId: string): Promise<(local: string) => RouteRow | undefined> {
    const rows = await db.select().from(r).where(eq(r.domainId, domainId));
    return (local) => bestRoute(rows, local);
  }

  return {
    upsert,
    secretOf: (row: RouteRow) => deps.sealer.open(row.secretSealed),

    async setCatchAll(actor: Actor, domainId: string, input: { url: string; ackMode?: 'lenient' | 'ack' }) {
      const d = await deps.domains.load(actor, domainId);
      inboundReady(d);
      const { row, secret } = await upsert(
        d,
        '*',
        await checkWebhookDestination(input.url, deps.net),
        input.ackMode ?? 'lenient',
      );
      return {
        domain: domainDto(d),
        webhookUrl: row.url,
        ackMode: row.ackMode,
        routeId: row.id,
        signingSecret: secret,
      };
    },

    async deleteCatchAll(actor: Actor, domainId: string) {
      const d = await deps.domains.load(actor, domainId);
      await db.delete(r).where(and(eq(r.domainId, d.id), eq(r.pattern, '*')));
      receivingConfigChanged();
      return { ok: true as const };
    },

    async catchAllOf(actor: Actor, domainId: string) {
      const d = await deps.domains.load(actor, domainId);
      const row = await catchAll(d);
      if (!row) throw notFound('This domain has no webhook');
      return { domain: d, route: row };
    },

    /** Catch-all routes of these domains, for list/detail enrichment. */
    async catchAllsFor(domainIds: string[]): Promise<Map<string, RouteRow>> {
      if (domainIds.length === 0) return new Map();
      const rows = await db
        .select()
        .from(r)
        .where(and(inArray(r.domainId, domainIds), eq(r.pattern, '*'), eq(r.action, 'webhook')));
      return new Map(rows.map((row) => [row.domainId, row]));
    },

    async list(actor: Actor) {
      const rows = await db
        .select({ r, domain: schema.domains.domain })
        .from(r)
        .innerJoin(schema.domains, eq(schema.domains.id, r.domainId))
        .where(
          and(
            eq(r.userId, actor.userId),
            ne(r.pattern, TRACKING_PATTERN),
            ...(actor.domainId ? [eq(r.domainId, actor.domainId)] : []),
          ),
        )
        .orderBy(r.createdAt);
      return rows.map((x) => routeDto(x.r, x.domain));
    },

    async create(actor: Actor, input: RouteInput) {
      const { d, pattern } = await target(actor, input);
      inboundReady(d);
      const { url, ...action } = await actionOf(d, input);
      const { row, secret } = await upsert(d, pattern, url, input.ackMode ?? 'lenient', action);
      return { ...routeDto(row, d.domain), signingSecret: secret };
    },

    async remove(actor: Actor, id: string) {
      const [row] = await db
        .select()
        .from(r)
        .where(and(eq(r.id, id), eq(r.userId, actor.userId)));
      if (!row || row.pattern === TRACKING_PATTERN || (actor.domainId && row.domainId !== actor.domainId))
        throw notFound('Route not found');
      await db.delete(r).where(eq(r.id, id));
      receivingConfigChanged();
      return { ok: true as const };
    },

    matcher,
  };
}
export type RouteService = ReturnType<typeof createRouteService>;

/**
 * `local@domain.tld`: one `@`, no whitespace, a dot inside the domain. Checked by hand: the regex
 * `^[^\s@]+@[^\s@]+\.[^\s@]+$` backtracked quadratically over a domain of many dots.
 */
export function looksLikeAddress(addr: string): boolean {
  const at = addr.indexOf('@');
  const domain = addr.slice(at + 1);
  return at > 0 && !domain.includes('@') && !/\s/.test(addr) && domain.slice(1, -1).includes('.');
}
