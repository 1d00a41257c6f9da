import { and, asc, eq, gt, inArray, sql } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { newId } from '../ids.js';
import { domainOf, formatMailbox, parseMailbox } from '../sending/addresses.js';
import type { TemplateService } from '../templates/service.js';
import type { UsageService } from '../usage.js';
import type { Audience } from './audience.js';
import { snapshotAudience } from './audience.js';
import { renderForRecipient } from './content.js';
import { unsubscribeHeaders, type UnsubscribeTokens } from './unsubscribe.js';

const b = schema.broadcasts;
const r = schema.broadcastRecipients;
const c = schema.contacts;
const m = schema.messages;
type Progress = { sent: number; failed: number; skipped: number };
export type PreparedBatch = { canceled: boolean; messageIds: string[]; skipped: number; firstSeq: number; lastSeq: number; done: boolean; domains: Record<string, number> };

/**
 * The database side of a broadcast's fan-out workflow: the ledger snapshot, the per-batch step that
 * re-checks each recipient and inserts its queued message in the same transaction that records the
 * message id on the ledger row (so a retried step never makes a second message), and the final counts.
 */
export function createFanoutService(deps: { db: Db; templates: TemplateService; usage: UsageService; unsubscribe: UnsubscribeTokens }) {
  const { db } = deps;

  return {
    /** Moves a due broadcast to `sending` and snapshots its audience (idempotent); `canceled` when it was canceled meanwhile. */
    async snapshot(broadcastId: string): Promise<{ canceled: boolean; total: number }> {
      return db.transaction(async (tx) => {
        const [row] = await tx.update(b).set({ status: 'sending', updatedAt: Date.now() })
          .where(and(eq(b.id, broadcastId), inArray(b.status, ['scheduled', 'sending']))).returning();
        if (!row) return { canceled: true, total: 0 };
        const total = await snapshotAudience(tx, broadcastId, row.userId, row.audience as Audience);
        await tx.update(b).set({ audienceCount: total }).where(eq(b.id, broadcastId));
        return { canceled: false, total };
      });
    },

    /** The next `limit` ledger entries after `afterSeq`: skip the unsubscribed and suppressed, queue a message for each other one. */
    async prepareBatch(input: { broadcastId: string; afterSeq: number; limit: number; progress: Progress }): Promise<PreparedBatch> {
      const none = { messageIds: [], skipped: 0, firstSeq: input.afterSeq, lastSeq: input.afterSeq, domains: {} };
      return db.transaction(async (tx) => {
        const p = input.progress;
        const [bc] = await tx.update(b).set({ sentCount: p.sent, failCount: p.failed, skipCount: p.skipped, updatedAt: Date.now() })
          .where(and(eq(b.id, input.broadcastId), eq(b.status, 'sending'))).returning();
        if (!bc) return { ...none, canceled: true, done: true };
        const rows = await tx.select({
          seq: r.seq, contactId: r.contactId, email: r.email, status: r.status, messageId: r.messageId,
          name: c.name, attributes: c.attributes, subscribed: c.subscribed,
          suppressed: sql<boolean>`exists (select 1 from ${schema.suppressions} s where s.user_id = ${bc.userId} and s.email = ${r.email})`,
        }).from(r).leftJoin(c, eq(c.id, r.contactId))
          .where(and(eq(r.broadcastId, input.broadcastId), gt(r.seq, input.afterSeq))).orderBy(asc(r.seq)).limit(input.limit);
        if (rows.length === 0) return { ...none, canceled: false, done: true };

        const from = parseMailbox(bc.fromAddr, 'from');
        const [domain] = await tx.select({ id: schema.domains.id, name: schema.domains.domain }).from(schema.domains)
          .where(and(eq(schema.domains.userId, bc.userId), eq(schema.domains.domain, domainOf(from.address))));
        const template = bc.templateId ? await deps.templates.resolve(bc.userId, bc.templateId) : undefined;
        const content = { subject: bc.subject, preview: bc.preview, html: bc.html, text: bc.text, footerAddress: bc.footerAddress, template };

        const messageIds: string[] = [];
        const skips: { seq: number; reason: string }[] = [];
        const queued: { seq: number; id: string }[] = [];
        const messages: (typeof m.$inferInsert)[] = [];
        const domains: Record<string, number> = {};
        const now = Date.now();
        for (const row of rows) {
          if (row.status === 'skipped') { skips.push({ seq: row.seq, reason: '' }); continue; }
          if (row.status === 'queued' && row.messageId) {
            messageIds.push(row.messageId);
            domains[domainOf(row.email)] = (domains[domainOf(row.email)] ?? 0) + 1;
            continue;
          }
          const reason = !domain ? 'sender_domain_gone' : row.subscribed === null ? 'contact_deleted' : !row.subscribed ? 'unsubscribed' : row.suppressed ? 'suppressed' : undefined;
          if (reason) { skips.push({ seq: row.seq, reason }); continue; }
          const links = deps.unsubscribe.links(row.contactId, domain!.name);
          const body = renderForRecipient(content, { email: row.email, name: row.name, attributes: row.attributes ?? {} }, links.url);
          const id = newId('msg');
          messages.push({
            id, userId: bc.userId, direction: 'outbound', kind: 'user', domainId: domain!.id, fromAddr: formatMailbox(from),
            toAddrs: [formatMailbox({ name: row.name ?? '', address: row.email })], ccAddrs: [], bccAddrs: [],
            replyTo: bc.replyTo, ...body, headers: unsubscribeHeaders(links), metadata: { broadcast_id: bc.id },
            status: 'queued', createdAt: now, updatedAt: now,
          });
          queued.push({ seq: row.seq, id });
          messageIds.push(id);
          domains[domainOf(row.email)] = (domains[domainOf(row.email)] ?? 0) + 1;
        }
        if (messages.length) {
          await tx.insert(m).values(messages);
          await tx.execute(sql`update ${r} set status = 'queued', message_id = v.mid
            from (values ${sql.join(queued.map((q) => sql`(${q.seq}::int, ${q.id})`), sql`, `)}) as v(seq, mid)
            where ${r.broadcastId} = ${input.broadcastId} and ${r.seq} = v.seq`);
          await deps.usage.consume(tx, bc.userId, messages.length, { outbound: true });
        }
        const fresh = skips.filter((s) => s.reason);
        if (fresh.length) {
          await tx.execute(sql`update ${r} set status = 'skipped', skip_reason = v.reason
            from (values ${sql.join(fresh.map((s) => sql`(${s.seq}::int, ${s.reason})`), sql`, `)}) as v(seq, reason)
            where ${r.broadcastId} = ${input.broadcastId} and ${r.seq} = v.seq`);
        }
        return {
          canceled: false, messageIds, skipped: skips.length, firstSeq: rows[0]!.seq, lastSeq: rows.at(-1)!.seq,
          done: rows.length < input.limit, domains,
        };
      });
    },

    /** Final counts from the ledger and the messages; the broadcast ends `sent`, `failed` (nothing sent, or `error`) or `canceled`. */
    async finish(input: { broadcastId: string; canceled: boolean; error?: string }) {
      const [n] = await db.select({
        sent: sql<number>`count(*) filter (where ${m.status} = 'sent')::int`,
        failed: sql<number>`count(*) filter (where ${m.status} in ('bounced', 'failed'))::int`,
        skipped: sql<number>`count(*) filter (where ${r.status} = 'skipped')::int`,
      }).from(r).leftJoin(m, eq(m.id, r.messageId)).where(eq(r.broadcastId, input.broadcastId));
      const counts = { sent: Number(n?.sent ?? 0), failed: Number(n?.failed ?? 0), skipped: Number(n?.skipped ?? 0) };
      if (input.error) console.error(`[broadcast] ${input.broadcastId} stopped: ${input.error}`);
      const status = input.canceled ? 'canceled' as const : input.error || (counts.sent === 0 && counts.failed > 0) ? 'failed' as const : 'sent' as const;
      const now = Date.now();
      await db.update(b).set({ status, sentCount: counts.sent, failCount: counts.failed, skipCount: counts.skipped, sentAt: status === 'canceled' ? null : now, updatedAt: now })
        .where(and(eq(b.id, input.broadcastId), inArray(b.status, ['scheduled', 'sending'])));
      return { status, ...counts };
    },
  };
}
export type FanoutService = ReturnType<typeof createFanoutService>;
