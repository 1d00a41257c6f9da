import { and, eq, inArray } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { badRequest, conflict, notFound } from '../errors.js';
import { newId } from '../ids.js';
import { upsertContacts } from '../contacts/service.js';
import { checkInput, type SequenceDefinition } from './definition.js';
import type { Scalar } from './enrolment-types.js';
import type { SendJob, SequenceDispatcher } from './dispatch.js';

export type SendEnrolment = { sequenceId: string; version: number; input: Record<string, Scalar> };
type OutboxRow = typeof schema.sequenceOutbox.$inferSelect;

/**
 * `sequence` on POST /v1/send (SPEC.md): the name or id must name an active sequence of the account
 * (answered on the call), the input is auto-filled from templateData and metadata with sequenceInput
 * merged over it and checked against the declared signature. The recipients are enrolled once the send
 * is accepted: the outbox rows are written before the message commits (the enrolment checks the message exists).
 */
export function createSendEnrolments(deps: { db: Db; dispatcher: SequenceDispatcher }) {
  const { db } = deps;
  return {
    async resolve(userId: string, req: { sequence: string; sequenceInput?: Record<string, Scalar>; templateData?: Record<string, Scalar>; metadata?: Record<string, Scalar> }): Promise<SendEnrolment> {
      const s = schema.sequences;
      const [row] = await db.select().from(s).where(and(eq(s.userId, userId), req.sequence.startsWith('seq_') ? eq(s.id, req.sequence) : eq(s.name, req.sequence)));
      if (!row) throw notFound(`No sequence named "${req.sequence}"`, 'sequence_not_found');
      if (row.status !== 'active') throw conflict(`The sequence "${row.name}" is ${row.status}, not active`, 'sequence_not_active');
      const [v] = await db.select().from(schema.sequenceVersions)
        .where(and(eq(schema.sequenceVersions.sequenceId, row.id), eq(schema.sequenceVersions.version, row.version)));
      const d = v!.definition as unknown as SequenceDefinition;
      const checked = checkInput(d.input ?? {}, { ...req.templateData, ...req.metadata }, req.sequenceInput);
      if ('field' in checked) throw badRequest(checked.problem, 'invalid_sequence_input', { field: checked.field });
      return { sequenceId: row.id, version: row.version, input: checked.input };
    },

    /** Makes the recipients contacts and writes one outbox row each; answers the rows to hand over after the commit. */
    async write(userId: string, e: SendEnrolment, m: { messageId: string; from: string; subject: string; to: string[] }): Promise<OutboxRow[]> {
      const contacts = await upsertContacts(db, userId, m.to.map((email) => ({ email })), { touch: true });
      const now = Date.now();
      const rows: OutboxRow[] = contacts.map((c) => {
        const job: SendJob = { start: {
          sequenceId: e.sequenceId, version: e.version, userId, contactId: c.id, email: c.email, input: e.input,
          trigger: { kind: 'send', key: m.messageId, at: now, data: { from: m.from, subject: m.subject, messageId: m.messageId, to: c.email } },
        } };
        return { id: newId('sqo'), userId, kind: 'send', data: job as unknown as Record<string, unknown>, createdAt: now };
      });
      if (rows.length) await db.insert(schema.sequenceOutbox).values(rows);
      return rows;
    },
    handOver: (rows: OutboxRow[]) => deps.dispatcher.enqueue(rows),
    /** The send did not commit: its enrolments are not owed. */
    async discard(rows: OutboxRow[]) {
      await db.delete(schema.sequenceOutbox).where(inArray(schema.sequenceOutbox.id, rows.map((r) => r.id)));
    },
  };
}
export type SendEnrolments = ReturnType<typeof createSendEnrolments>;
