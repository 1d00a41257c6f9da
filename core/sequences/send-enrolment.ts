import { and, asc, eq, inArray, isNull, lt, or, sql } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { badRequest, conflict, notFound } from '../errors.js';
import { newId } from '../ids.js';
import { upsertContacts } from '../contacts/service.js';
import { checkInput, type SequenceDefinition } from './definition.js';
import type { Scalar } from '../ports/sequences.js';
import type { SendJob, SequenceDispatcher } from './dispatch.js';

export type SendEnrolment = { sequenceId: string; version: number; input: Record<string, Scalar> };
type OutboxRow = typeof schema.sequenceOutbox.$inferSelect;
/** Message statuses after which no recipient of it will be delivered any more. */
const ENDED = ['canceled', 'failed', 'bounced', 'sent'];

/**
 * `sequence` on POST /v1/send (SPEC.md): the name or id must name an active sequence of the account
 * (answered on the call), the input is auto-filled from templateData and metadata with sequenceInput
 * merged over it and checked against the declared signature. A recipient is enrolled when the send
 * succeeds for it (SPEC.md: "enrolls the recipient after the send succeeds"): one held outbox row per
 * recipient is written with the message, handed to the dispatcher once that recipient's delivery is
 * accepted by its server, and deleted when it bounces, is suppressed or the send is cancelled. A scheduled
 * send therefore enrolls when it is released and delivered, a cancelled one never.
 */
export function createSendEnrolments(deps: { db: Db; dispatcher: SequenceDispatcher; contactCap?: number }) {
  const { db } = deps;
  const o = schema.sequenceOutbox;

  /** Hands over the held rows of these recipients (their delivery succeeded) and drops the rows of `failed`. */
  async function settle(messageId: string, outcome: { sent: string[]; failed: string[] }): Promise<void> {
    const sent = outcome.sent.map((a) => a.toLowerCase());
    const failed = outcome.failed.map((a) => a.toLowerCase());
    if (failed.length)
      await db.delete(o).where(and(eq(o.messageId, messageId), eq(o.held, true), inArray(o.email, failed)));
    if (sent.length === 0) return;
    const released = await db
      .update(o)
      .set({ held: false })
      .where(and(eq(o.messageId, messageId), eq(o.held, true), inArray(o.email, sent)))
      .returning();
    if (released.length) deps.dispatcher.enqueue(released);
  }

  return {
    settle,

    async resolve(
      userId: string,
      req: {
        sequence: string;
        sequenceInput?: Record<string, Scalar>;
        templateData?: Record<string, Scalar>;
        metadata?: Record<string, Scalar>;
      },
    ): Promise<SendEnrolment> {
      const s = schema.sequences;
      const [row] = await db
        .select()
        .from(s)
        .where(
          and(
            eq(s.userId, userId),
            req.sequence.startsWith('seq_') ? eq(s.id, req.sequence) : eq(s.name, req.sequence),
          ),
        );
      if (!row) throw notFound(`No sequence named "${req.sequence}"`, 'sequence_not_found');
      if (row.status !== 'active')
        throw conflict(`The sequence "${row.name}" is ${row.status}, not active`, 'sequence_not_active');
      const [v] = await db
        .select()
        .from(schema.sequenceVersions)
        .where(and(eq(schema.sequenceVersions.sequenceId, row.id), eq(schema.sequenceVersions.version, row.version)));
      const d = v!.definition as unknown as SequenceDefinition;
      const checked = checkInput(d.input ?? {}, { ...req.templateData, ...req.metadata }, req.sequenceInput);
      if ('field' in checked) throw badRequest(checked.problem, 'invalid_sequence_input', { field: checked.field });
      return { sequenceId: row.id, version: row.version, input: checked.input };
    },

    /**
     * Makes the recipients contacts and writes one held outbox row each, before the message commits;
     * recipients that would take the account past its contact cap refuse the send (403 contacts_limit).
     */
    async write(
      userId: string,
      e: SendEnrolment,
      m: { messageId: string; from: string; subject: string; to: string[] },
    ): Promise<OutboxRow[]> {
      const contacts = await db.transaction((tx) =>
        upsertContacts(
          tx,
          userId,
          m.to.map((email) => ({ email })),
          { touch: true, cap: deps.contactCap },
        ),
      );
      const now = Date.now();
      const rows: OutboxRow[] = contacts.map((c) => {
        const job: SendJob = {
          start: {
            sequenceId: e.sequenceId,
            version: e.version,
            userId,
            contactId: c.id,
            email: c.email,
            input: e.input,
            trigger: {
              kind: 'send',
              key: m.messageId,
              at: now,
              data: { from: m.from, subject: m.subject, messageId: m.messageId, to: c.email },
            },
          },
        };
        return {
          id: newId('sqo'),
          userId,
          kind: 'send',
          data: job as unknown as Record<string, unknown>,
          createdAt: now,
          messageId: m.messageId,
          email: c.email.toLowerCase(),
          held: true,
        };
      });
      if (rows.length) await db.insert(o).values(rows);
      return rows;
    },

    /** The send did not commit: its enrolments are not owed. */
    async discard(rows: OutboxRow[]) {
      await db.delete(o).where(
        inArray(
          o.id,
          rows.map((r) => r.id),
        ),
      );
    },

    /**
     * Held rows older than `olderThanMs` whose message has an outcome for their recipient (a crash between
     * the outcome and its settle, or a message that ended without one): settled from the message row.
     */
    async sweepHeld(olderThanMs: number, limit: number): Promise<number> {
      const m = schema.messages;
      // Only rows with something to settle (a scheduled send days away stays held, and out of the way).
      const settled = or(
        isNull(m.id),
        inArray(m.status, ENDED),
        sql`${m.recipients} -> ${o.email} ->> 'status' in ('sent', 'bounced')`,
      );
      const rows = await db
        .select({ messageId: o.messageId, email: o.email, status: m.status, recipients: m.recipients })
        .from(o)
        .leftJoin(m, eq(m.id, o.messageId))
        .where(and(eq(o.held, true), lt(o.createdAt, Date.now() - olderThanMs), settled))
        .orderBy(asc(o.createdAt))
        .limit(limit);
      const byMessage = new Map<string, { sent: string[]; failed: string[] }>();
      for (const r of rows) {
        const state = r.recipients?.[r.email ?? '']?.status;
        const ended = r.status === null || ENDED.includes(r.status);
        const verdict = state === 'sent' ? 'sent' : state === 'bounced' || ended ? 'failed' : undefined;
        if (!verdict || !r.messageId) continue;
        const entry = byMessage.get(r.messageId) ?? { sent: [], failed: [] };
        entry[verdict].push(r.email ?? '');
        byMessage.set(r.messageId, entry);
      }
      for (const [messageId, outcome] of byMessage) await settle(messageId, outcome);
      return byMessage.size;
    },
  };
}
export type SendEnrolments = ReturnType<typeof createSendEnrolments>;
