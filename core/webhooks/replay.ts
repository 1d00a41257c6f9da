import { and, desc, eq, inArray } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import type { Actor } from '../domains/service.js';
import { badRequest, conflict, notFound } from '../errors.js';
import type { WorkflowPort } from '../index.js';
import { deliveryDto, type DeliveryRow, type DeliveryStore } from './deliveries.js';
import { failureClass } from './post.js';

export const MAX_REPLAY_IDS = 50;
type Result = { messageId: string | null; routeId: string | null; deliveryId: string | null; ok: boolean; status: number | null; reason: string | null };

/** Manual replay: a new delivery row per replay (history is append-only), first attempt now, the ladder after. */
export function createReplayService(deps: { db: Db; deliveries: DeliveryStore; workflows: WorkflowPort; retrySchedule: number[] }) {
  const { db } = deps;
  const dl = schema.deliveries;

  /** Replays one (message, route): new row, attempt 1 now; a failure continues on the retry ladder. */
  async function replayOf(source: DeliveryRow) {
    if (source.kind !== 'engagement' && (await deps.deliveries.bodyOf(source)) === undefined) return undefined;
    const row = await deps.deliveries.create({
      userId: source.userId, messageId: source.messageId, routeId: source.routeId, domainId: source.domainId, url: source.url,
      kind: source.kind === 'engagement' ? 'engagement' : 'replay', payload: source.payload ?? undefined,
    });
    const r = await deps.deliveries.attempt(row.id, 1, deps.retrySchedule[0] ?? null);
    if (!r.ok && deps.retrySchedule.length > 0) await deps.workflows.startWebhookDelivery({ deliveryId: row.id, startAttempt: 2, userId: row.userId, messageId: row.messageId });
    const [fresh] = await db.select().from(dl).where(eq(dl.id, row.id));
    return { r, row: fresh! };
  }

  async function owned(actor: Actor, ids: string[]): Promise<DeliveryRow[]> {
    if (ids.length === 0) return [];
    const rows = await db.select().from(dl).where(and(inArray(dl.id, ids), eq(dl.userId, actor.userId)));
    return rows.filter((r) => !actor.domainId || r.domainId === actor.domainId);
  }

  /** The most recent delivery per route of each message. */
  async function latestPerRoute(actor: Actor, messageIds: string[]): Promise<Map<string, DeliveryRow[]>> {
    const rows = messageIds.length ? await db.select().from(dl).where(and(inArray(dl.messageId, messageIds), eq(dl.userId, actor.userId))).orderBy(desc(dl.createdAt)) : [];
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

    /** Bulk replay: threads expand to messages before the 50-id cap; one POST per (message, endpoint) at most. */
    async retryMany(actor: Actor, input: { deliveryIds?: string[]; messageIds?: string[]; threadIds?: string[] }) {
      const threadMsgs = input.threadIds?.length
        ? await db.select({ id: schema.messages.id }).from(schema.messages).where(and(eq(schema.messages.userId, actor.userId), inArray(schema.messages.threadId, input.threadIds)))
        : [];
      const deliveryIds = [...new Set(input.deliveryIds ?? [])];
      const messageIds = [...new Set([...(input.messageIds ?? []), ...threadMsgs.map((m) => m.id)])];
      if (deliveryIds.length + messageIds.length === 0) throw badRequest('Give deliveryIds, messageIds or threadIds (threads with no messages expand to nothing)', 'nothing_requested');
      if (deliveryIds.length + messageIds.length > MAX_REPLAY_IDS) throw badRequest(`At most ${MAX_REPLAY_IDS} ids per request (threads are expanded first)`, 'too_many_ids');

      const results: Result[] = [];
      const jobs: DeliveryRow[] = [];
      const seen = new Set<string>();
      const take = (r: DeliveryRow) => {
        const key = `${r.messageId}|${r.url}`;
        if (seen.has(key)) return results.push({ messageId: r.messageId, routeId: r.routeId, deliveryId: null, ok: false, status: null, reason: 'duplicate_endpoint' });
        seen.add(key);
        jobs.push(r);
      };
      const found = await owned(actor, deliveryIds);
      for (const id of deliveryIds) {
        const r = found.find((x) => x.id === id);
        if (r) take(r);
        else results.push({ messageId: null, routeId: null, deliveryId: id, ok: false, status: null, reason: 'not_found' });
      }
      const latest = await latestPerRoute(actor, messageIds);
      for (const mid of messageIds) {
        const list = latest.get(mid);
        if (list?.length) list.forEach(take);
        else results.push({ messageId: mid, routeId: null, deliveryId: null, ok: false, status: null, reason: 'no_delivery' });
      }
      for (const r of await runLimited(jobs, 8, replayOf)) results.push(r);
      const count = (f: (r: Result) => boolean) => results.filter(f).length;
      const skipped = count((r) => r.deliveryId === null || r.reason === 'not_found' || r.reason === 'no_delivery' || r.reason === 'duplicate_endpoint');
      return {
        ok: results.every((r) => r.ok), requested: results.length, delivered: count((r) => r.ok), failed: results.length - skipped - count((r) => r.ok), skipped, results,
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
    await Promise.all(Array.from({ length: Math.min(limit, rows.length) }, async () => {
      while (next < rows.length) {
        const src = rows[next++]!;
        const done = await fn(src);
        out.push(done
          ? { messageId: src.messageId, routeId: src.routeId, deliveryId: done.row.id, ok: done.r.ok, status: done.r.status, reason: done.r.ok ? null : failureClass(done.r.reason) }
          : { messageId: src.messageId, routeId: src.routeId, deliveryId: null, ok: false, status: null, reason: 'no_delivery' });
      }
    }));
    return out;
  }
}
export type ReplayService = ReturnType<typeof createReplayService>;
