import { and, asc, desc, eq, ilike, inArray, lt, or, sql } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { ownedBy, type Actor } from '../tenancy.js';
import { notFound } from '../errors.js';
import type { EventService } from '../message-events.js';
import { deliveryDto } from '../webhooks/deliveries.js';
import type { SpamVerdict } from '../spam/rspamd.js';

type Row = typeof schema.messages.$inferSelect;
/** A stored verdict; a webhook's `spam` reply adds `marked`. */
type MessageSpam = SpamVerdict & { marked?: boolean };

/** Reading what happened: messages newest first, one message with its events and delivery state. */
/** Where an operator reads a run: the Temporal UI page of a workflow (null when no UI URL is known). */
export type RunLink = (workflowId: string) => string | null;

export function createMessageService(deps: { db: Db; events: EventService; runLink: RunLink }) {
  const { db } = deps;
  const m = schema.messages;
  const dto = (r: Row) => ({
    id: r.id,
    direction: r.direction,
    status: r.status,
    domain_id: r.domainId,
    from: r.fromAddr,
    to: r.toAddrs,
    cc: r.ccAddrs ?? [],
    subject: r.subject,
    metadata: r.metadata ?? null,
    attempts: r.attempts,
    last_error: r.lastError,
    workflow_id: r.workflowId,
    smtp_message_id: r.smtpMessageId,
    bounce_type: r.bounceType,
    next_attempt_at: r.nextAttemptAt,
    created_at: r.createdAt,
    updated_at: r.updatedAt,
    sent_at: r.sentAt,
    // Inbound: rspamd's verdict (null on outbound mail and on mail received before scoring).
    spam: r.direction === 'inbound' ? ((r.spam as MessageSpam | null) ?? null) : null,
  });
  const scope = (actor: Actor) => and(ownedBy(actor, m), eq(m.kind, 'user'));

  /**
   * The stored copy of an inbound message: the sealed one (`inbound_raw`, a domain with a key), else the clear
   * bytes of its mailbox body; undefined when none is kept (zero retention, dropped, or gone with the mailbox).
   */
  async function storedCopy(
    messageId: string,
  ): Promise<{ raw: Buffer; encrypted: boolean; alg: string | null } | undefined> {
    const [sealed] = await db
      .select({ raw: schema.inboundRaw.content, encrypted: schema.inboundRaw.encrypted, alg: schema.inboundRaw.encAlg })
      .from(schema.inboundRaw)
      .where(eq(schema.inboundRaw.messageId, messageId));
    if (sealed?.encrypted) return sealed;
    const [body] = await db
      .select({ raw: schema.mailboxBodies.raw })
      .from(schema.mailboxMessages)
      .innerJoin(schema.mailboxBodies, eq(schema.mailboxBodies.id, schema.mailboxMessages.bodyId))
      .where(eq(schema.mailboxMessages.messageId, messageId))
      .limit(1);
    return body ? { raw: body.raw, encrypted: false, alg: null } : undefined;
  }

  return {
    /** `GET /api/messages/:id/raw`: the stored copy of an inbound message (sealed as stored, or clear); 404 without one. */
    async raw(actor: Actor, id: string) {
      const [row] = await db
        .select({ direction: m.direction })
        .from(m)
        .where(and(scope(actor), eq(m.id, id)));
      if (!row) throw notFound('Message not found');
      const copy = row.direction === 'inbound' ? await storedCopy(id) : undefined;
      if (!copy) throw notFound('No stored copy of this message is kept', 'no_stored_copy');
      return { id, ...copy };
    },

    async list(
      actor: Actor,
      opts: { limit: number; before?: number; search?: string; direction?: 'outbound' | 'inbound' },
    ) {
      const like = opts.search ? `%${opts.search.replace(/[%_\\]/g, '\\$&')}%` : undefined;
      const rows = await db
        .select()
        .from(m)
        .where(
          and(
            scope(actor),
            ...(opts.before ? [lt(m.createdAt, opts.before)] : []),
            ...(opts.direction ? [eq(m.direction, opts.direction)] : []),
            ...(like
              ? [or(ilike(m.subject, like), ilike(m.fromAddr, like), sql`${m.toAddrs}::text ilike ${like}`)]
              : []),
          ),
        )
        .orderBy(desc(m.createdAt))
        .limit(opts.limit);
      return rows.map(dto);
    },

    async get(actor: Actor, id: string) {
      const [row] = await db
        .select()
        .from(m)
        .where(and(scope(actor), eq(m.id, id)));
      if (!row) throw notFound('Message not found');
      const events = await deps.events.list(actor, { limit: 500, messageId: id });
      const attachments = (row.attachments ?? []).map((a) => ({ filename: a.filename, contentType: a.contentType }));
      const deliveries = await db
        .select()
        .from(schema.deliveries)
        .where(eq(schema.deliveries.messageId, id))
        .orderBy(desc(schema.deliveries.createdAt));
      const attempts = deliveries.length
        ? await db
            .select()
            .from(schema.deliveryAttempts)
            .where(
              inArray(
                schema.deliveryAttempts.deliveryId,
                deliveries.map((d) => d.id),
              ),
            )
            .orderBy(asc(schema.deliveryAttempts.requestedAt))
        : [];
      const recipients = Object.entries(row.recipients ?? {}).map(([address, r]) => ({
        address,
        status: r.status,
        attempts: r.attempts,
        response: r.response ?? null,
        at: r.at ?? null,
        ...(r.bounceClass && r.status !== 'sent' ? { bounceClass: r.bounceClass } : {}),
      }));
      // The delivery trail: every SMTP transaction (outbound) or webhook attempt (inbound), oldest first.
      const trail = [
        ...(row.trail ?? []).map((t) => ({
          kind: 'smtp' as const,
          at: t.at,
          workflowId: t.workflowId,
          to: t.to,
          status: t.status,
          response: t.response,
          ...(t.source ? { source: t.source } : {}),
          ...(t.tls ? { tls: t.tls } : {}),
        })),
        ...attempts.map((a) => ({
          kind: 'webhook' as const,
          at: a.requestedAt,
          workflowId: deliveries.find((d) => d.id === a.deliveryId)?.workflowId ?? null,
          deliveryId: a.deliveryId,
          attempt: a.attemptNumber,
          status: a.ok ? 'delivered' : 'failed',
          response: a.responseStatus ? `HTTP ${a.responseStatus}${a.reason ? ` (${a.reason})` : ''}` : (a.reason ?? ''),
        })),
      ].sort((a, b) => a.at - b.at);
      const runIds = new Set<string>(
        [row.workflowId, ...trail.map((t) => t.workflowId), ...deliveries.map((d) => d.workflowId)].filter(
          (x): x is string => Boolean(x),
        ),
      );
      const runs = [...runIds].map((workflowId) => ({ workflowId, url: deps.runLink(workflowId) }));
      const copy = row.direction === 'inbound' ? await storedCopy(id) : undefined;
      return {
        message: {
          ...dto(row),
          html: row.html,
          text: row.text,
          thread_id: row.threadId,
          auth: row.direction === 'inbound' ? (row.auth ?? null) : null,
          recipients,
          // Inbound on a domain with a key: the sealed copy, for the owner's private key (MailKite.decrypt).
          sealed: copy?.encrypted ? { alg: copy.alg ?? 'RSA-OAEP-256', envelope: copy.raw.toString('utf8') } : null,
        },
        attachments,
        deliveries: deliveries.map(deliveryDto),
        events,
        trail,
        runs,
      };
    },
  };
}
export type MessageService = ReturnType<typeof createMessageService>;
/** Media types of a sealed copy, by algorithm: what the bytes of a raw download are. */
export const SEALED_TYPES: Record<string, string> = {
  'RSA-OAEP-256': 'application/json',
  PGP: 'application/pgp-encrypted',
  'S/MIME': 'message/rfc822',
};
