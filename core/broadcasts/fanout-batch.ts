import { and, asc, eq, gt, sql } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import type { AppError } from '../errors.js';
import { newId } from '../ids.js';
import { domainOf, formatMailbox, type Mailbox } from '../mail/addresses.js';
import type { Admitted, SendGate } from '../gate/gate.js';
import type { TemplateService } from '../templates/service.js';
import { runParse } from '../parsing/pool.js';
import { unsubscribeHeaders, type UnsubscribeTokens } from '../contacts/unsubscribe.js';

const r = schema.broadcastRecipients;
const c = schema.contacts;
const m = schema.messages;
type Tx = Pick<Db, 'select' | 'insert' | 'update' | 'execute'>;
type Broadcast = typeof schema.broadcasts.$inferSelect;
export type LedgerRow = Awaited<ReturnType<typeof ledgerBatch>>[number];
/** What one batch step hands the workflow: the messages to deliver, how many were skipped, the recipient domains (for pacing). */
export type BatchWork = { messageIds: string[]; skipped: number; domains: Record<string, number>; refusal?: AppError };

/** The next `limit` ledger entries after `afterSeq`, with their contact and whether the address is suppressed. */
export function ledgerBatch(tx: Tx, userId: string, q: { broadcastId: string; afterSeq: number; limit: number }) {
  return tx
    .select({
      seq: r.seq,
      contactId: r.contactId,
      email: r.email,
      status: r.status,
      messageId: r.messageId,
      name: c.name,
      attributes: c.attributes,
      subscribed: c.subscribed,
      suppressed: sql<boolean>`exists (select 1 from ${schema.suppressions} s where s.user_id = ${userId} and s.email = ${r.email})`,
    })
    .from(r)
    .leftJoin(c, eq(c.id, r.contactId))
    .where(and(eq(r.broadcastId, q.broadcastId), gt(r.seq, q.afterSeq)))
    .orderBy(asc(r.seq))
    .limit(q.limit);
}

/** Entries an earlier attempt of this step already handled: its queued messages (still to deliver) and its skips. */
export function earlier(rows: LedgerRow[]): BatchWork {
  const work: BatchWork = { messageIds: [], skipped: 0, domains: {} };
  for (const row of rows) {
    if (row.status === 'skipped') work.skipped += 1;
    if (row.status !== 'queued' || !row.messageId) continue;
    work.messageIds.push(row.messageId);
    work.domains[domainOf(row.email)] = (work.domains[domainOf(row.email)] ?? 0) + 1;
  }
  return work;
}

/** Marks every entry after `afterSeq` still pending as failed with the gate's code as reason; answers how many. */
export async function failRest(tx: Tx, broadcastId: string, afterSeq: number, refusal: AppError): Promise<number> {
  const failed = await tx
    .update(r)
    .set({ status: 'failed', skipReason: refusal.code })
    .where(and(eq(r.broadcastId, broadcastId), gt(r.seq, afterSeq), eq(r.status, 'pending')))
    .returning({ seq: r.seq });
  return failed.length;
}

/**
 * Queues one batch of an admitted broadcast: skips the unsubscribed, deleted and suppressed entries,
 * reserves the rest against the plan's caps (the gate), and inserts a message for each entry the caps
 * took, recording its id on the ledger row in the same transaction. Answers the refusal of the entries
 * the caps did not take (they stay pending for `failRest`).
 */
export function createBatchQueuer(deps: {
  templates: TemplateService;
  unsubscribe: UnsubscribeTokens;
  gate: SendGate;
}) {
  return async function queueBatch(
    tx: Tx,
    bc: Broadcast,
    from: Mailbox,
    admitted: Admitted,
    rows: LedgerRow[],
  ): Promise<BatchWork> {
    const domain = admitted.domain!;
    const template = bc.templateId ? await deps.templates.resolve(bc.userId, bc.templateId) : undefined;
    const content = {
      subject: bc.subject,
      preview: bc.preview,
      html: bc.html,
      text: bc.text,
      footerAddress: bc.footerAddress,
      template,
    };
    const work = earlier(rows);
    const skips: { seq: number; reason: string }[] = [];
    const fresh: { seq: number; email: string; message: typeof m.$inferInsert }[] = [];
    const now = Date.now();
    const sendable: { row: LedgerRow; links: ReturnType<UnsubscribeTokens['links']> }[] = [];
    for (const row of rows.filter((x) => x.status === 'pending')) {
      const reason =
        row.subscribed === null
          ? 'contact_deleted'
          : !row.subscribed
            ? 'unsubscribed'
            : row.suppressed
              ? 'suppressed'
              : undefined;
      if (reason) skips.push({ seq: row.seq, reason });
      else sendable.push({ row, links: deps.unsubscribe.links(row.contactId, domain.domain) });
    }
    // Every copy of the batch rendered by one task of the parse pool, never on the worker's event loop.
    const bodies =
      sendable.length === 0
        ? []
        : await runParse('renderBroadcast', {
            content,
            recipients: sendable.map(({ row, links }) => ({
              recipient: { email: row.email, name: row.name, attributes: row.attributes ?? {} },
              unsubscribeUrl: links.url,
            })),
          });
    for (const [i, { row, links }] of sendable.entries()) {
      const body = bodies[i]!;
      fresh.push({
        seq: row.seq,
        email: row.email,
        message: {
          id: newId('msg'),
          userId: bc.userId,
          direction: 'outbound',
          kind: 'user',
          domainId: domain.id,
          fromAddr: formatMailbox(from),
          toAddrs: [formatMailbox({ name: row.name ?? '', address: row.email })],
          ccAddrs: [],
          bccAddrs: [],
          replyTo: bc.replyTo,
          ...body,
          headers: unsubscribeHeaders(links),
          metadata: { broadcast_id: bc.id },
          status: 'queued',
          createdAt: now,
          updatedAt: now,
        },
      });
    }
    const { granted, refusal } = await deps.gate.reserveUpTo(tx, bc.userId, admitted.plan, fresh.length);
    const kept = fresh.slice(0, granted);
    if (kept.length) {
      await tx.insert(m).values(kept.map((k) => k.message));
      await tx.execute(sql`update ${r} set status = 'queued', message_id = v.mid
        from (values ${sql.join(
          kept.map((k) => sql`(${k.seq}::int, ${k.message.id})`),
          sql`, `,
        )}) as v(seq, mid)
        where ${r.broadcastId} = ${bc.id} and ${r.seq} = v.seq`);
    }
    if (skips.length) {
      await tx.execute(sql`update ${r} set status = 'skipped', skip_reason = v.reason
        from (values ${sql.join(
          skips.map((s) => sql`(${s.seq}::int, ${s.reason})`),
          sql`, `,
        )}) as v(seq, reason)
        where ${r.broadcastId} = ${bc.id} and ${r.seq} = v.seq`);
    }
    for (const k of kept) {
      work.messageIds.push(k.message.id!);
      work.domains[domainOf(k.email)] = (work.domains[domainOf(k.email)] ?? 0) + 1;
    }
    return { ...work, skipped: work.skipped + skips.length, refusal };
  };
}
