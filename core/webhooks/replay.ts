import { and, asc, desc, eq, inArray } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import type { Actor } from '../tenancy.js';
import { conflict, notFound } from '../errors.js';
import type { WebhookDeliveryWorkflows } from '../ports/inbound.js';
import { deliveryDto, type DeliveryRow, type DeliveryStore } from './deliveries.js';
import { failureClass } from './post.js';

export const MAX_REPLAY_IDS = 50;
/** Messages the thread ids of one bulk replay may expand to (they count against the 50-id cap). */
const MAX_EXPANDED_MESSAGES = 1000;
type Result = {
  messageId: string | null;
  routeId: string | null;
  deliveryId: string | null;
  ok: boolean;
  status: number | null;
  reason: string | null;
  threadId?: string;
};
/** Reasons of results that were not attempted. */
const SKIPS = new Set(['not_found', 'no_delivery', 'duplicate_endpoint', 'too_many_ids']);
const skip = (
  ids: { messageId?: string; routeId?: string; deliveryId?: string; threadId?: string },
  reason: string,
): Result => ({
  messageId: ids.messageId ?? null,
  routeId: ids.routeId ?? null,
  deliveryId: ids.deliveryId ?? null,
  ok: false,
  status: null,
  reason,
  ...(ids.threadId ? { threadId: ids.threadId } : {}),
});

/** Manual replay: a new delivery row per replay (history is append-only), first attempt now, the ladder after. */
export function createReplayService(deps: {
  db: Db;
  deliveries: DeliveryStore;
  workflows: WebhookDeliveryWorkflows;
  retrySchedule: number[];
}) {
  const { db } = deps;
  const dl = schema.deliveries;

  /** Replays one (message, route): new row, attempt 1 now; a failure continues on the retry ladder. */
  async function replayOf(source: DeliveryRow) {
    if (source.kind !== 'engagement' && (await deps.deliveries.bodyOf(source)) === undefined) return undefined;
    const row = await deps.deliveries.create({
      userId: source.userId,
      messageId: source.messageId,
      routeId: source.routeId,
      domainId: source.domainId,
      url: source.url,
      kind: source.kind === 'engagement' ? 'engagement' : 'replay',
      payload: source.payload ?? undefined,
    });
    const r = await deps.deliveries.attempt(row.id, 1, deps.retrySchedule[0] ?? null);
    if (!r.ok && deps.retrySchedule.length > 0)
      await deps.workflows.startWebhookDelivery({
        deliveryId: row.id,
        startAttempt: 2,
        userId: row.userId,
        messageId: row.messageId,
      });
    const [fresh] = await db.select().from(dl).where(eq(dl.id, row.id));
    return { r, row: fresh! };
  }

  /**
   * The actor's messages of the threads, oldest first, in request order of the threads. At most
   * MAX_EXPANDED_MESSAGES are read (far past the cap): threads left unread are reported past the cap, threads
   * with no message as not found.
   */
  async function expandThreads(actor: Actor, threadIds: string[]) {
    const ids = [...new Set(threadIds)];
    const m = schema.messages;
    const rows = ids.length
      ? await db
          .select({ id: m.id, threadId: m.threadId })
          .from(m)
          .where(
            and(
              eq(m.userId, actor.userId),
              inArray(m.threadId, ids),
              ...(actor.domainId ? [eq(m.domainId, actor.domainId)] : []),
            ),
          )
          .orderBy(asc(m.createdAt))
          .limit(MAX_EXPANDED_MESSAGES)
      : [];
    const per = new Map<string, string[]>();
    for (const r of rows) {
      const list = per.get(r.threadId!) ?? [];
      list.push(r.id);
      per.set(r.threadId!, list);
    }
    const cut = rows.length === MAX_EXPANDED_MESSAGES;
    const unread = ids.filter((t) => !per.has(t));
    return {
      messageIds: ids.flatMap((t) => per.get(t) ?? []),
      skipped: unread.map((threadId) => skip({ threadId }, cut ? 'too_many_ids' : 'not_found')),
    };
  }

  async function owned(actor: Actor, ids: string[]): Promise<DeliveryRow[]> {
    if (ids.length === 0) return [];
    const rows = await db
      .select()
      .from(dl)
      .where(and(inArray(dl.id, ids), eq(dl.userId, actor.userId)));
    return rows.filter((r) => !actor.domainId || r.domainId === actor.domainId);
  }

  /** The most recent delivery per route of each message. */
  async function latestPerRoute(actor: Actor, messageIds: string[]): Promise<Map<string, DeliveryRow[]>> {
    const rows = messageIds.length
      ? await db
          .select()
          .from(dl)
          .where(and(inArray(dl.messageId, messageIds), eq(dl.userId, actor.userId)))
          .orderBy(desc(dl.createdAt))
      : [];
    const out = new Map<string, DeliveryRow[]>();
    for (const r of rows) {
      if (actor.domainId && r.domainId !== actor.domainId) continue;
      const list = out.get(r.messageId) ?? [];
      if (!list.some((x) => x.routeId === r.routeId)) list.push(r);
      out.set(r.messageId, list);
    }
    return out;
  }

  return {
    async retryOne(actor: Actor, id: string) {
      const [source] = await owned(actor, [id]);
      if (!source) throw notFound('Delivery not found');
      const done = await replayOf(source);
      if (!done) throw conflict('Nothing to replay: this message was not retained', 'no_delivery');
      return { ok: done.r.ok, status: done.r.status ?? 0, delivery: deliveryDto(done.row) };
    },

    /**
     * Bulk replay, always answered (SPEC.md: HTTP 200): threads expand to messages before the 50-id cap,
     * every id gets a result (ids past the cap are skipped as `too_many_ids`), one POST per (message, endpoint) at most.
     */
    async retryMany(actor: Actor, input: { deliveryIds?: string[]; messageIds?: string[]; threadIds?: string[] }) {
      const threads = await expandThreads(actor, input.threadIds ?? []);
      const results: Result[] = [...threads.skipped];
      const deliveryIds = [...new Set(input.deliveryIds ?? [])];
      const messageIds = [...new Set([...(input.messageIds ?? []), ...threads.messageIds])];
      const room = Math.max(0, MAX_REPLAY_IDS - deliveryIds.length);
      results.push(...deliveryIds.slice(MAX_REPLAY_IDS).map((id) => skip({ deliveryId: id }, 'too_many_ids')));
      results.push(...messageIds.slice(room).map((id) => skip({ messageId: id }, 'too_many_ids')));

      const jobs: DeliveryRow[] = [];
      const seen = new Set<string>();
      const take = (r: DeliveryRow) => {
        const key = `${r.messageId}|${r.url}`;
        if (seen.has(key))
          return results.push(skip({ messageId: r.messageId, routeId: r.routeId }, 'duplicate_endpoint'));
        seen.add(key);
        jobs.push(r);
      };
      const wantedDeliveries = deliveryIds.slice(0, MAX_REPLAY_IDS);
      const found = await owned(actor, wantedDeliveries);
      for (const id of wantedDeliveries) {
        const r = found.find((x) => x.id === id);
        if (r) take(r);
        else results.push(skip({ deliveryId: id }, 'not_found'));
      }
      const wantedMessages = messageIds.slice(0, room);
      const latest = await latestPerRoute(actor, wantedMessages);
      for (const mid of wantedMessages) {
        const list = latest.get(mid);
        if (list?.length) list.forEach(take);
        else results.push(skip({ messageId: mid }, 'no_delivery'));
      }
      for (const r of await runLimited(jobs, 8, replayOf)) results.push(r);
      const count = (f: (r: Result) => boolean) => results.filter(f).length;
      const skipped = count((r) => r.reason !== null && SKIPS.has(r.reason));
      const delivered = count((r) => r.ok);
      return {
        ok: results.length > 0 && delivered === results.length,
        requested: results.length,
        delivered,
        failed: results.length - skipped - delivered,
        skipped,
        results,
      };
    },

    async attempts(actor: Actor, id: string) {
      const [d] = await owned(actor, [id]);
      if (!d) throw notFound('Delivery not found');
      return { attempts: await deps.deliveries.attemptsOf(id) };
    },
  };

  async function runLimited(rows: DeliveryRow[], limit: number, fn: typeof replayOf): Promise<Result[]> {
    const out: Result[] = [];
    let next = 0;
    await Promise.all(
      Array.from({ length: Math.min(limit, rows.length) }, async () => {
        while (next < rows.length) {
          const src = rows[next++]!;
          const done = await fn(src);
          out.push(
            done
              ? {
                  messageId: src.messageId,
                  routeId: src.routeId,
                  deliveryId: done.row.id,
                  ok: done.r.ok,
                  status: done.r.status,
                  reason: done.r.ok ? null : failureClass(done.r.reason),
                }
              : skip({ messageId: src.messageId, routeId: src.routeId }, 'no_delivery'),
          );
        }
      }),
    );
    return out;
  }
}
export type ReplayService = ReturnType<typeof createReplayService>;
