import { sql } from 'drizzle-orm';
import { boolean, index, integer, jsonb, pgTable, primaryKey, text, uniqueIndex } from 'drizzle-orm/pg-core';
import { ms } from './columns.js';

/** A sequence definition as stored per version (core/sequences/definition.ts validates it). */
export type SequenceDefinitionJson = Record<string, unknown>;
type Scalar = string | number | boolean | null;

/**
 * Sequences (`seq_`): drip flows started by an application event or by a send. The definition lives in
 * `sequence_versions`; `version` names the current one. Editing a sequence that is not a draft adds a
 * version, so running enrolments keep the steps they started with.
 */
export const sequences = pgTable(
  'sequences',
  {
    id: text('id').primaryKey(),
    userId: text('user_id').notNull(),
    name: text('name').notNull(),
    status: text('status', { enum: ['draft', 'active', 'paused', 'archived'] }).notNull(),
    version: integer('version').notNull(),
    /** The trigger of the current version (`event:<name>` or `send`), for the event dispatcher's lookup. */
    triggerEvent: text('trigger_event'),
    createdAt: ms('created_at').notNull(),
    updatedAt: ms('updated_at').notNull(),
  },
  (t) => [
    uniqueIndex('sequences_user_name_uq').on(t.userId, t.name),
    index('sequences_user_trigger_idx').on(t.userId, t.triggerEvent),
  ],
);

export const sequenceVersions = pgTable(
  'sequence_versions',
  {
    sequenceId: text('sequence_id').notNull(),
    version: integer('version').notNull(),
    definition: jsonb('definition').$type<SequenceDefinitionJson>().notNull(),
    /** Every event name a `wait_for_event` step of this version waits for. */
    waitsFor: jsonb('waits_for').$type<string[]>().notNull().default([]),
    createdAt: ms('created_at').notNull(),
  },
  (t) => [primaryKey({ columns: [t.sequenceId, t.version] })],
);

/** One step taken by an enrolment, with its outcome (`sent`, `waited`, `arrived`, `timed_out`, `skipped`, ...). */
export type EnrolmentStepRecord = {
  index: number;
  type: string;
  outcome: string;
  at: number;
  startedAt: number;
  detail?: Record<string, unknown>;
};

/**
 * Enrolments (`enr_`) of a contact in a sequence version, written by the enrolment workflow. The id is
 * derived from (sequence, contact, trigger), so a trigger handed to Temporal twice enrolls once.
 */
export const sequenceEnrolments = pgTable(
  'sequence_enrolments',
  {
    id: text('id').primaryKey(),
    userId: text('user_id').notNull(),
    sequenceId: text('sequence_id').notNull(),
    version: integer('version').notNull(),
    contactId: text('contact_id').notNull(),
    email: text('email').notNull(),
    workflowId: text('workflow_id').notNull(),
    runId: text('run_id'),
    status: text('status', { enum: ['running', 'completed', 'exited', 'canceled', 'failed'] }).notNull(),
    currentStep: integer('current_step'),
    waitingFor: text('waiting_for'),
    waitsFor: jsonb('waits_for').$type<string[]>().notNull().default([]),
    steps: jsonb('steps').$type<EnrolmentStepRecord[]>().notNull().default([]),
    trigger: jsonb('trigger').$type<Record<string, Scalar>>().notNull(),
    input: jsonb('input').$type<Record<string, Scalar>>().notNull(),
    exitReason: text('exit_reason'),
    createdAt: ms('created_at').notNull(),
    updatedAt: ms('updated_at').notNull(),
    endedAt: ms('ended_at'),
  },
  (t) => [
    index('sequence_enrolments_seq_idx').on(t.sequenceId, t.createdAt),
    index('sequence_enrolments_contact_idx')
      .on(t.contactId)
      .where(sql`status = 'running'`),
    index('sequence_enrolments_user_email_idx')
      .on(t.userId, t.email)
      .where(sql`status = 'running'`),
  ],
);

/** Application events (`cev_`, SPEC.md Custom event): what the caller's user did. */
export const appEvents = pgTable(
  'app_events',
  {
    id: text('id').primaryKey(),
    userId: text('user_id').notNull(),
    name: text('name').notNull(),
    email: text('email').notNull(),
    contactId: text('contact_id'),
    payload: jsonb('payload').$type<Record<string, unknown>>(),
    dedupeKey: text('dedupe_key'),
    createdAt: ms('created_at').notNull(),
  },
  (t) => [
    index('app_events_user_created_idx').on(t.userId, t.createdAt),
    index('app_events_user_name_idx').on(t.userId, t.name, t.createdAt),
    index('app_events_contact_idx').on(t.contactId, t.name, t.createdAt),
    uniqueIndex('app_events_dedupe_uq')
      .on(t.userId, t.dedupeKey)
      .where(sql`dedupe_key is not null`),
  ],
);

/**
 * The sequence outbox: work for Temporal that a recorded event or an accepted send owes (start or wake
 * enrolments). Written with the event (or before the send's commit) and deleted once handed over; the
 * sweep hands over rows a crash left behind.
 */
export const sequenceOutbox = pgTable(
  'sequence_outbox',
  {
    id: text('id').primaryKey(),
    userId: text('user_id').notNull(),
    /** `event`: fan an app event out; `send`: enrol the recipients of an accepted send. */
    kind: text('kind', { enum: ['event', 'send'] }).notNull(),
    data: jsonb('data').$type<Record<string, unknown>>().notNull(),
    createdAt: ms('created_at').notNull(),
    /** `send`: the message whose delivery the enrolment waits for, and the recipient it enrols. */
    messageId: text('message_id'),
    email: text('email'),
    /** `send`: true until the recipient's delivery succeeded (then handed over) or failed (then deleted). */
    held: boolean('held').notNull().default(false),
  },
  (t) => [
    index('sequence_outbox_created_idx').on(t.createdAt),
    index('sequence_outbox_message_idx')
      .on(t.messageId)
      .where(sql`held`),
  ],
);
