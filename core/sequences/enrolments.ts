import { and, eq, gte, inArray, ne, sql, TransactionRollbackError } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import type { EnrolmentStepRecord } from '../../db/schema/sequences.js';
import { derivedId } from '../ids.js';
import { AppError } from '../errors.js';
import { domainOf, formatMailbox, parseMailbox, type Mailbox } from '../mail/addresses.js';
import { renderContent } from '../parsing/render.js';
import type { TemplateService } from '../templates/service.js';
import { mergeData, type MergeData } from '../render/merge.js';
import type { SendGate } from '../gate/gate.js';
import { unsubscribeHeaders, type UnsubscribeTokens } from '../contacts/unsubscribe.js';
import type { SequenceDefinition, SequenceStep } from './definition.js';
import type { EnrolmentEvent, EnrolmentStart, Scalar } from '../ports/sequences.js';

const e = schema.sequenceEnrolments;
const c = schema.contacts;
const ev = schema.appEvents;
type SendStep = Extract<SequenceStep, { type: 'send' }>;
type MessageValues = typeof schema.messages.$inferInsert;
type SendInput = {
  enrolmentId: string;
  index: number;
  start: EnrolmentStart;
  from: string;
  replyTo?: string;
  step: SendStep;
  event: Record<string, unknown>;
};
export type OpenedEnrolment = {
  status: 'opened' | 'duplicate' | 'inactive' | 'no_message';
  enrolmentId: string;
  definition: SequenceDefinition;
};

/** Flattens one object into `prefix.key` merge data (scalars only; nested values are skipped). */
function flat(prefix: string, o: Record<string, unknown> | null | undefined): MergeData {
  const out: MergeData = {};
  for (const [k, v] of Object.entries(o ?? {}))
    if (v === null || ['string', 'number', 'boolean'].includes(typeof v)) out[`${prefix}.${k}`] = v as Scalar;
  return out;
}

/**
 * The database side of the enrolment workflow: open the enrolment record once per trigger, record each
 * step as it starts (checking the contact can still be mailed, and finding events that came before a
 * wait began), send a step's email exactly once (the message id is derived from enrolment and step),
 * and close the record.
 */
/**
 * Appends a step record once: a retried activity (the worker died after the write, before the answer)
 * finds the record of that step, same index and start, already there and leaves the list as it is.
 */
const appendStep = (record: EnrolmentStepRecord) => {
  const key = JSON.stringify([{ index: record.index, startedAt: record.startedAt }]);
  return sql`case when ${e.steps} @> ${key}::jsonb then ${e.steps} else ${e.steps} || ${JSON.stringify([record])}::jsonb end`;
};

export function createEnrolmentStore(deps: {
  db: Db;
  templates: TemplateService;
  gate: SendGate;
  unsubscribe: UnsubscribeTokens;
  startDelivery: (messageIds: string[], userId: string) => Promise<void>;
}) {
  const { db } = deps;

  /** Why the contact can no longer be mailed, or undefined. */
  async function exitReason(userId: string, contactId: string): Promise<string | undefined> {
    const [row] = await db
      .select({ subscribed: c.subscribed, email: c.email })
      .from(c)
      .where(and(eq(c.userId, userId), eq(c.id, contactId)));
    if (!row) return 'contact_deleted';
    if (!row.subscribed) return 'unsubscribed';
    const sup = schema.suppressions;
    const [hit] = await db
      .select({ email: sup.email })
      .from(sup)
      .where(and(eq(sup.userId, userId), eq(sup.email, row.email)))
      .limit(1);
    return hit ? 'suppressed' : undefined;
  }

  /** A step's message row: content merged from the contact, the trigger, the input and the last event; unsubscribe headers. */
  async function stepMessage(
    input: SendInput,
    id: string,
    dom: { id: string; domain: string },
    from: Mailbox,
  ): Promise<MessageValues> {
    const { start } = input;
    const [contact] = await db.select().from(c).where(eq(c.id, start.contactId));
    const name = contact?.name ?? null;
    const links = deps.unsubscribe.links(start.contactId, dom.domain);
    const data = mergeData(
      contact?.attributes ?? {},
      {
        email: start.email,
        name: name ?? '',
        first_name: name ? (name.trim().split(/\s+/)[0] ?? '') : '',
        unsubscribe_url: links.url,
      },
      flat('trigger', start.trigger.data),
      flat('input', start.input),
      flat('event', input.event),
    );
    const template = input.step.templateId
      ? await deps.templates.resolve(start.userId, input.step.templateId)
      : undefined;
    const content = await renderContent({
      explicit: { subject: input.step.subject, html: input.step.html, text: input.step.text },
      template,
      data,
    });
    const now = Date.now();
    return {
      id,
      userId: start.userId,
      direction: 'outbound',
      kind: 'user',
      domainId: dom.id,
      fromAddr: formatMailbox(from),
      toAddrs: [formatMailbox({ name: name ?? '', address: start.email })],
      ccAddrs: [],
      bccAddrs: [],
      replyTo: input.replyTo ? formatMailbox(parseMailbox(input.replyTo, 'replyTo')) : null,
      ...content,
      headers: unsubscribeHeaders(links),
      metadata: { sequence_id: start.sequenceId, enrolment_id: input.enrolmentId, step: input.index },
      status: 'queued',
      createdAt: now,
      updatedAt: now,
    };
  }

  /** Inserts the message and reserves its recipient in one transaction; answers the cap's refusal (then nothing was inserted). */
  async function insertCounted(values: MessageValues, plan: string): Promise<AppError | undefined> {
    let capped: AppError | undefined;
    await db
      .transaction(async (tx) => {
        const inserted = await tx
          .insert(schema.messages)
          .values(values)
          .onConflictDoNothing()
          .returning({ id: schema.messages.id });
        if (inserted.length === 0) return; // an earlier attempt inserted (and counted) it
        capped = await deps.gate.reserve(tx, values.userId!, plan, 1);
        if (capped) tx.rollback(); // no message without its place under the caps
      })
      .catch((err: unknown) => {
        if (!(capped && err instanceof TransactionRollbackError)) throw err;
      });
    return capped;
  }

  return {
    /** Inserts the enrolment (id derived from sequence, contact and trigger); a trigger seen before answers `duplicate`. */
    async open(input: EnrolmentStart & { workflowId: string; runId: string }): Promise<OpenedEnrolment> {
      const id = derivedId('enr', input.sequenceId, input.contactId, input.trigger.key);
      const [v] = await db
        .select()
        .from(schema.sequenceVersions)
        .where(
          and(
            eq(schema.sequenceVersions.sequenceId, input.sequenceId),
            eq(schema.sequenceVersions.version, input.version),
          ),
        );
      const definition = (v?.definition ?? { steps: [] }) as unknown as SequenceDefinition;
      const [seq] = await db
        .select({ status: schema.sequences.status })
        .from(schema.sequences)
        .where(eq(schema.sequences.id, input.sequenceId));
      if (!v || seq?.status !== 'active') return { status: 'inactive', enrolmentId: id, definition };
      if (input.trigger.kind === 'send') {
        // The outbox row of a send is written before the message commits: no message, no enrolment.
        const [m] = await db
          .select({ id: schema.messages.id })
          .from(schema.messages)
          .where(eq(schema.messages.id, input.trigger.key));
        if (!m) return { status: 'no_message', enrolmentId: id, definition };
      }
      const now = Date.now();
      const [row] = await db
        .insert(e)
        .values({
          id,
          userId: input.userId,
          sequenceId: input.sequenceId,
          version: input.version,
          contactId: input.contactId,
          email: input.email,
          workflowId: input.workflowId,
          runId: input.runId,
          status: 'running',
          waitsFor: v.waitsFor,
          trigger: input.trigger.data,
          input: input.input,
          createdAt: now,
          updatedAt: now,
        })
        .onConflictDoNothing()
        .returning({ runId: e.runId });
      if (row) return { status: 'opened', enrolmentId: id, definition };
      const [old] = await db.select({ runId: e.runId }).from(e).where(eq(e.id, id));
      return { status: old?.runId === input.runId ? 'opened' : 'duplicate', enrolmentId: id, definition };
    },

    /** Records the step that finished, moves to step `index`; answers an exit reason, and for a wait the events already posted. */
    async enterStep(input: {
      enrolmentId: string;
      index: number;
      type: string;
      record?: EnrolmentStepRecord;
      waitingFor: string | null;
      findEvents?: { name: string; since: number };
    }): Promise<{ exit?: string; events: EnrolmentEvent[] }> {
      const [row] = await db
        .update(e)
        .set({
          currentStep: input.index,
          waitingFor: input.waitingFor,
          updatedAt: Date.now(),
          ...(input.record ? { steps: appendStep(input.record) } : {}),
        })
        .where(eq(e.id, input.enrolmentId))
        .returning({ userId: e.userId, contactId: e.contactId });
      if (!row) return { exit: 'enrolment_deleted', events: [] };
      const exit = input.type === 'exit' ? undefined : await exitReason(row.userId, row.contactId);
      if (exit || !input.findEvents) return { exit, events: [] };
      const events = await db
        .select({ id: ev.id, name: ev.name, payload: ev.payload, createdAt: ev.createdAt })
        .from(ev)
        .where(
          and(
            eq(ev.contactId, row.contactId),
            eq(ev.name, input.findEvents.name),
            gte(ev.createdAt, input.findEvents.since),
          ),
        )
        .orderBy(ev.createdAt)
        .limit(100);
      return { events };
    },

    /** Why the enrolment's contact can no longer be mailed (unsubscribed, suppressed, deleted), or null. */
    async checkContact(input: { enrolmentId: string }): Promise<string | null> {
      const [row] = await db
        .select({ userId: e.userId, contactId: e.contactId })
        .from(e)
        .where(eq(e.id, input.enrolmentId));
      return row ? ((await exitReason(row.userId, row.contactId)) ?? null) : 'enrolment_deleted';
    },

    /** Running enrolments of one contact of an account (by id or address), for contactChangedSignal. */
    async runningOf(userId: string, by: { contactId: string } | { email: string }) {
      const rows = await db
        .select({ workflowId: e.workflowId })
        .from(e)
        .where(
          and(
            eq(e.userId, userId),
            eq(e.status, 'running'),
            'contactId' in by ? eq(e.contactId, by.contactId) : eq(e.email, by.email.toLowerCase()),
          ),
        );
      return rows.map((r) => r.workflowId);
    },

    /**
     * Sends one step's email: the message id is derived from (enrolment, step), so a retry never sends twice.
     * The send gate judges the account and the sequence's sender and reserves the recipient against the
     * plan's caps with the insert; a refusal ends the enrolment with the gate's code as exit reason.
     */
    async send(input: SendInput) {
      const { start } = input;
      const exit = await exitReason(start.userId, start.contactId);
      if (exit) return { exit };
      const id = derivedId('msg', input.enrolmentId, String(input.index));
      const [done] = await db
        .select({ id: schema.messages.id, status: schema.messages.status })
        .from(schema.messages)
        .where(eq(schema.messages.id, id));
      if (!done) {
        const from = parseMailbox(input.from, 'from');
        const verdict = await deps.gate.judge({ userId: start.userId, sender: { name: domainOf(from.address) } });
        if (verdict instanceof AppError) return { exit: verdict.code };
        const capped = await insertCounted(await stepMessage(input, id, verdict.domain!, from), verdict.plan);
        if (capped) return { exit: capped.code };
      }
      // Starting twice is success (the delivery run's id is derived from the message); a crash here leaves it to the sweep.
      if (!done || done.status === 'queued') await deps.startDelivery([id], start.userId);
      return { messageId: id };
    },

    async close(input: {
      enrolmentId: string;
      status: 'completed' | 'exited' | 'canceled';
      reason: string | null;
      record?: EnrolmentStepRecord;
    }) {
      const now = Date.now();
      await db
        .update(e)
        .set({
          status: input.status,
          exitReason: input.reason,
          waitingFor: null,
          endedAt: now,
          updatedAt: now,
          ...(input.record ? { steps: appendStep(input.record) } : {}),
        })
        .where(and(eq(e.id, input.enrolmentId), ne(e.status, input.status)));
    },

    /** Running enrolments of these contacts (for waking them with events). */
    async running(contactIds: string[]) {
      if (contactIds.length === 0) return [];
      return db
        .select({ workflowId: e.workflowId, contactId: e.contactId, waitsFor: e.waitsFor })
        .from(e)
        .where(and(inArray(e.contactId, contactIds), eq(e.status, 'running')));
    },
  };
}
export type EnrolmentStore = ReturnType<typeof createEnrolmentStore>;
