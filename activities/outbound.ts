import { and, asc, eq, inArray, isNull, lt, or, sql } from 'drizzle-orm';
import type { Db } from '../db/index.js';
import { schema } from '../db/index.js';
import { renderMessage } from '../core/outbound/render.js';
import type { OutboundTransport } from '../core/outbound/transport.js';

export type OutboundDeps = { db: Db; transport: OutboundTransport; serviceDomain: string };
export type BatchResult = { sent: number; deferred: number; bounced: number; skipped: number };

/** Outbound activities: claim queued rows, render, hand to the provider, record each outcome. */
export function outboundActivities(deps: OutboundDeps) {
  const { db } = deps;
  const m = schema.messages;
  return {
    /**
     * Sends the given queued messages for `workflowId`. Idempotent: rows already sent or claimed by
     * another run are skipped; a retry of this run resumes its own `sending` rows.
     */
    async sendQueuedMessages(input: { messageIds: string[]; workflowId: string }): Promise<BatchResult> {
      const now = Date.now();
      const claimed = await db.update(m).set({ status: 'sending', workflowId: input.workflowId, updatedAt: now })
        .where(and(inArray(m.id, input.messageIds), or(eq(m.status, 'queued'), and(eq(m.status, 'sending'), eq(m.workflowId, input.workflowId)))))
        .returning();
      const result: BatchResult = { sent: 0, deferred: 0, bounced: 0, skipped: input.messageIds.length - claimed.length };
      for (const row of claimed) {
        const rendered = await renderMessage({ ...row, serviceDomain: deps.serviceDomain });
        const outcome = await deps.transport.send(row.id, rendered.envelope, rendered.raw, row.subject);
        const at = Date.now();
        const base = { attempts: sql`${m.attempts} + 1`, updatedAt: at, smtpMessageId: rendered.messageId };
        if (outcome.status === 'sent') {
          await db.update(m).set({ ...base, status: 'sent', sentAt: at, lastError: null }).where(eq(m.id, row.id));
          result.sent += 1;
        } else if (outcome.status === 'permanent') {
          await db.update(m).set({ ...base, status: 'bounced', lastError: outcome.error }).where(eq(m.id, row.id));
          result.bounced += 1;
        } else {
          await db.update(m).set({ ...base, status: 'deferred', lastError: outcome.error }).where(eq(m.id, row.id));
          result.deferred += 1;
        }
      }
      return result;
    },

    /** Ids of outbound rows still `queued` and unclaimed after `olderThanMs`: their batch never started. */
    async findStrandedMessages(input: { olderThanMs: number; limit: number }): Promise<string[]> {
      const rows = await db.select({ id: m.id }).from(m)
        .where(and(eq(m.status, 'queued'), eq(m.direction, 'outbound'), isNull(m.workflowId), lt(m.createdAt, Date.now() - input.olderThanMs)))
        .orderBy(asc(m.createdAt)).limit(input.limit);
      return rows.map((r) => r.id);
    },
  };
}
