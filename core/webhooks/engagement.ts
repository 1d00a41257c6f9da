import { and, asc, eq, inArray, lt, or } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { domainDto } from '../domains/dto.js';
import type { DomainService } from '../domains/service.js';
import type { Actor } from '../tenancy.js';
import { badRequest } from '../errors.js';
import { describeError, log } from '../log.js';
import type { EngagementWorkflows, WebhookDeliveryWorkflows } from '../ports/inbound.js';
import type { AccountSecretService } from './account-secret.js';
import type { DeliveryStore } from './deliveries.js';
import {
  domainSendingPausedPayload,
  engagementPayload,
  type DomainSendingPausedPayload,
  type EngagementPayload,
} from './payload-schemas.js';
import { DOMAIN_EVENT_TYPES } from '../message-events.js';
import { postWebhook } from './post.js';
import { TRACKING_PATTERN } from '../mail/patterns.js';
import type { RouteService } from './routes.js';
import { checkWebhookDestination, type NetPolicy } from './url.js';
import { derivedId } from '../ids.js';
import { retryTransient } from '../retry.js';
import type { Progress } from '../mail/progress.js';

/** A claim older than this belongs to a dispatcher that died (a batch is time-boxed to a minute). */
const STALE_CLAIM_MS = 5 * 60_000;
const idle: Progress = { beat() {}, stopped: () => false };

import { ENGAGEMENT_TYPES } from '../mail/event-types.js';
type Target = { routeId: string; url: string; ackMode: 'lenient' | 'ack'; secret: string };

/** A domain event's body (no message): its stored data, built through its published schema. */
function domainEventPayload(e: typeof schema.events.$inferSelect): DomainSendingPausedPayload {
  const payload = {
    id: e.id,
    type: 'domain.sending_paused' as const,
    createdAt: e.createdAt,
    createdAtIso: new Date(e.createdAt).toISOString(),
    data: (e.data ?? {}) as DomainSendingPausedPayload['data'],
  };
  const checked = domainSendingPausedPayload.safeParse(payload);
  if (!checked.success)
    log.error(`[engagement] event ${e.id} does not match its published schema: ${checked.error.message}`);
  return checked.success ? checked.data : payload;
}

/**
 * Engagement events to webhooks (SPEC.md Events): the tracking webhook when set (account secret) wins;
 * else the catch-all route when the domain opted in to the type (route secret). Events are recorded
 * `pending` first and delivered in batches; only an event whose first POST fails gets a workflow.
 */
export function createEngagementService(deps: {
  db: Db;
  domains: DomainService;
  routes: RouteService;
  accountSecret: AccountSecretService;
  deliveries: DeliveryStore;
  workflows: WebhookDeliveryWorkflows & EngagementWorkflows;
  retrySchedule: number[];
  net: NetPolicy;
}) {
  const { db } = deps;
  const d = schema.domains;
  const ev = schema.events;

  async function target(domainId: string, type: string): Promise<Target | undefined> {
    const [dom] = await db.select().from(d).where(eq(d.id, domainId));
    const domainEvent = (DOMAIN_EVENT_TYPES as readonly string[]).includes(type);
    if (!dom || !(domainEvent || (ENGAGEMENT_TYPES as readonly string[]).includes(type))) return undefined;
    const routes = await db
      .select()
      .from(schema.routes)
      .where(and(eq(schema.routes.domainId, domainId), inArray(schema.routes.pattern, [TRACKING_PATTERN, '*'])));
    const tracking = routes.find((r) => r.pattern === TRACKING_PATTERN);
    if (tracking)
      return {
        routeId: tracking.id,
        url: tracking.url,
        ackMode: tracking.ackMode,
        secret: await deps.accountSecret.get(dom.userId),
      };
    const catchAll = routes.find((r) => r.pattern === '*' && r.action === 'webhook');
    const wanted = dom.webhookEvents ? (JSON.parse(dom.webhookEvents) as 'all' | string[]) : undefined;
    // A domain event (the guard's pause) goes to the catch-all route whatever the domain opted in to.
    if (!catchAll || (!domainEvent && (!wanted || (wanted !== 'all' && !wanted.includes(type))))) return undefined;
    return {
      routeId: catchAll.id,
      url: catchAll.url,
      ackMode: catchAll.ackMode,
      secret: deps.routes.secretOf(catchAll),
    };
  }

  /**
   * The account secret signs every domain's tracking events, and SPEC.md answers it as `signingSecret` to
   * every credential these routes take, a domain-scoped key included (the receiver needs it to verify).
   */
  const secretFor = async (actor: Actor) => ({ signingSecret: await deps.accountSecret.get(actor.userId) });

  async function payloadOf(e: typeof ev.$inferSelect): Promise<EngagementPayload | DomainSendingPausedPayload> {
    if ((DOMAIN_EVENT_TYPES as readonly string[]).includes(e.type)) return domainEventPayload(e);
    const [m] = e.messageId ? await db.select().from(schema.messages).where(eq(schema.messages.id, e.messageId)) : [];
    const data = (e.data ?? {}) as Record<string, unknown>;
    const payload = {
      id: e.id,
      type: e.type,
      createdAt: e.createdAt,
      createdAtIso: new Date(e.createdAt).toISOString(),
      data: {
        messageId: e.messageId,
        from: m?.fromAddr ?? null,
        to: e.recipient ? [e.recipient] : (m?.toAddrs ?? []),
        subject: m?.subject ?? null,
        ...data,
      },
    };
    // Built through the published schema (GET /v1/schemas/webhook-email-*.json); a row it does not describe is sent as stored, and logged.
    const checked = engagementPayload.safeParse(payload);
    if (!checked.success)
      log.error(`[engagement] event ${e.id} does not match its published schema: ${checked.error.message}`);
    return checked.success ? checked.data : (payload as EngagementPayload);
  }

  return {
    router: {
      nudge: (domainId: string, userId: string) =>
        void deps.workflows
          .nudgeEngagement(domainId, userId)
          .catch((err) => log.error(`[engagement] nudge failed: ${describeError(err)}`)),
    },

    async setTrackingWebhook(actor: Actor, domainId: string, url: string) {
      const dom = await deps.domains.load(actor, domainId);
      const clean = await checkWebhookDestination(url, deps.net);
      await deps.routes.upsert(dom, TRACKING_PATTERN, clean, 'lenient');
      const [row] = await db
        .update(d)
        .set({ trackingWebhookUrl: clean, updatedAt: Date.now() })
        .where(eq(d.id, dom.id))
        .returning();
      return { domain: domainDto(row!), ...(await secretFor(actor)) };
    },
    async clearTrackingWebhook(actor: Actor, domainId: string) {
      const dom = await deps.domains.load(actor, domainId);
      await db
        .delete(schema.routes)
        .where(and(eq(schema.routes.domainId, dom.id), eq(schema.routes.pattern, TRACKING_PATTERN)));
      await db.update(d).set({ trackingWebhookUrl: null, updatedAt: Date.now() }).where(eq(d.id, dom.id));
      return { ok: true as const };
    },
    async setWebhookEvents(actor: Actor, domainId: string, events: 'all' | string[]) {
      const dom = await deps.domains.load(actor, domainId);
      if (events !== 'all' && events.length === 0)
        throw badRequest('events: give "all" or at least one event type', 'validation_error');
      const [row] = await db
        .update(d)
        .set({ webhookEvents: JSON.stringify(events), updatedAt: Date.now() })
        .where(eq(d.id, dom.id))
        .returning();
      return { domain: domainDto(row!), ...(await secretFor(actor)) };
    },
    async clearWebhookEvents(actor: Actor, domainId: string) {
      const dom = await deps.domains.load(actor, domainId);
      await db.update(d).set({ webhookEvents: null, updatedAt: Date.now() }).where(eq(d.id, dom.id));
      return { ok: true as const };
    },

    /**
     * One batch of a domain's pending events, one POST each: events are claimed first (a stale claim,
     * left by a run that died, is taken over), each outcome is written as it is known, and a failure
     * becomes its own retried delivery with an id derived from the event (so doing it twice makes one).
     * Time-boxed: it stops after `timeBoxMs` or when cancelled and hands back what it did not reach.
     */
    async dispatchBatch(
      domainId: string,
      limit: number,
      progress: Progress = idle,
      timeBoxMs = 60_000,
    ): Promise<{ processed: number; more: boolean }> {
      const now = Date.now();
      const claimable = db
        .select({ id: ev.id })
        .from(ev)
        .where(
          and(
            eq(ev.domainId, domainId),
            or(
              eq(ev.webhookState, 'pending'),
              and(eq(ev.webhookState, 'sending'), lt(ev.claimedAt, now - STALE_CLAIM_MS)),
            ),
          ),
        )
        .orderBy(asc(ev.createdAt))
        .limit(limit)
        .for('update', { skipLocked: true });
      const claimed = await db
        .update(ev)
        .set({ webhookState: 'sending', claimedAt: now })
        .where(inArray(ev.id, claimable))
        .returning();
      claimed.sort((a, b) => a.createdAt - b.createdAt);
      const targets = new Map<string, Target | undefined>(); // one lookup per event type in a batch
      const deadline = now + timeBoxMs;
      let processed = 0;
      for (const e of claimed) {
        if (progress.stopped() || Date.now() > deadline) break;
        if (!targets.has(e.type)) targets.set(e.type, await target(domainId, e.type));
        const t = targets.get(e.type);
        if (!t) {
          await db.update(ev).set({ webhookState: null, claimedAt: null }).where(eq(ev.id, e.id));
        } else {
          const payload = await payloadOf(e);
          const c = await postWebhook({
            url: t.url,
            body: JSON.stringify(payload),
            secret: t.secret,
            ackMode: t.ackMode,
            net: deps.net,
          });
          await retryTransient(
            async () => {
              if (!c.ok) {
                const row = await deps.deliveries.create({
                  id: derivedId('dlv', 'engagement', e.id),
                  userId: e.userId,
                  messageId: e.messageId ?? '',
                  routeId: t.routeId,
                  domainId,
                  url: t.url,
                  kind: 'engagement',
                  payload,
                });
                await deps.deliveries.record(row, 1, c, t.url, deps.retrySchedule[0] ?? null);
                if (deps.retrySchedule.length)
                  await deps.workflows.startWebhookDelivery({
                    deliveryId: row.id,
                    startAttempt: 2,
                    userId: row.userId,
                    messageId: row.messageId,
                  });
              }
              await db
                .update(ev)
                .set({ webhookState: c.ok ? 'done' : 'failed' })
                .where(eq(ev.id, e.id));
            },
            { onWait: () => progress.beat() },
          );
        }
        processed += 1;
        progress.beat();
      }
      const left = claimed.slice(processed).map((e) => e.id);
      if (left.length)
        await db.update(ev).set({ webhookState: 'pending', claimedAt: null }).where(inArray(ev.id, left));
      return { processed, more: claimed.length === limit || left.length > 0 };
    },

    /** Domains with events left pending or claimed by a run that died (a lost nudge); the sweep wakes their dispatchers. */
    async strandedDomains(olderThanMs: number): Promise<{ domainId: string; userId: string }[]> {
      const now = Date.now();
      const rows = await db
        .selectDistinct({ domainId: ev.domainId, userId: ev.userId })
        .from(ev)
        .where(
          or(
            and(eq(ev.webhookState, 'pending'), lt(ev.createdAt, now - olderThanMs)),
            and(eq(ev.webhookState, 'sending'), lt(ev.claimedAt, now - STALE_CLAIM_MS)),
          ),
        );
      return rows.filter((r): r is { domainId: string; userId: string } => Boolean(r.domainId));
    },
  };
}
export type EngagementService = ReturnType<typeof createEngagementService>;
