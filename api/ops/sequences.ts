import { z } from 'zod';
import { defineOperation, okSchema } from '../contract.js';
import { definitionFields, inputTypes } from '../../core/sequences/definition.js';

const AUTH = ['session', 'oauth', 'account_key'] as const;
const sequenceRef = z.string().min(1).max(200).describe('seq_… id, or the sequence name');
const enrolmentId = z
  .string()
  .regex(/^enr_[A-Za-z0-9_-]{20,}$/, 'an enrolment id (enr_…)')
  .describe('enr_…');
const status = z
  .enum(['draft', 'active', 'paused', 'archived'])
  .describe('Only active sequences enroll; paused and archived ones keep their running enrolments');
const scalar = z.union([z.string(), z.number(), z.boolean(), z.null()]);

/** A stored step as answered (durations in ms). */
const storedStep = z.looseObject({
  type: z.enum(['send', 'wait', 'wait_for_event', 'exit']),
  id: z.string().optional(),
});
const sequence = z.object({
  id: z.string().describe('seq_…'),
  name: z.string(),
  status,
  version: z.number().int().describe('Current version; enrolments keep the one they began on'),
  from: z.string(),
  replyTo: z.string().optional(),
  input: z.record(z.string(), inputTypes).optional(),
  trigger: z.object({ type: z.enum(['event', 'send']), event: z.string().optional() }),
  steps: z.array(storedStep),
  createdAt: z.number().int(),
  updatedAt: z.number().int(),
});
const stepRecord = z.object({
  index: z.number().int(),
  type: z.string(),
  outcome: z.string().describe('sent, waited, arrived or timed_out'),
  startedAt: z.number().int(),
  at: z.number().int().describe('When the step finished'),
  detail: z.record(z.string(), z.unknown()).optional(),
});
const enrolment = z.object({
  id: z.string().describe('enr_…'),
  sequenceId: z.string(),
  version: z.number().int(),
  contactId: z.string(),
  email: z.string(),
  status: z.enum(['running', 'completed', 'exited', 'canceled', 'failed']),
  currentStep: z.number().int().nullable(),
  waitingFor: z.string().nullable().describe('Event name a wait_for_event step waits for'),
  steps: z.array(stepRecord).describe('Steps done, with times'),
  trigger: z.record(z.string(), scalar),
  input: z.record(z.string(), scalar),
  exitReason: z.string().nullable().describe('unsubscribed, suppressed, contact_deleted, canceled'),
  workflowId: z.string(),
  createdAt: z.number().int(),
  updatedAt: z.number().int(),
  endedAt: z.number().int().nullable(),
});
const enrolmentDetail = enrolment.extend({
  live: z.boolean().describe("true when the current step came from the running workflow's stateQuery"),
  waitUntil: z.number().int().nullable().optional().describe('When the current wait ends (ms epoch), while running'),
});
const { from, replyTo, input, trigger, steps } = definitionFields;

export const listSequences = defineOperation({
  name: 'sequences.list',
  method: 'GET',
  path: '/api/sequences',
  auth: AUTH,
  summary: "The account's sequences, newest first, each with its current version.",
  output: z.array(sequence),
  handler: (_i, { core, actor }) => core.sequences.list(actor),
});

export const createSequence = defineOperation({
  name: 'sequences.create',
  method: 'POST',
  path: '/api/sequences',
  auth: AUTH,
  status: 201,
  idempotencyKey: true,
  summary: 'Create a sequence (draft unless `status` says active).',
  body: z.strictObject({
    name: z
      .string()
      .min(1)
      .max(200)
      .refine((n) => !n.startsWith('seq_'), 'names cannot look like an id (seq_…)'),
    status: status.optional(),
    from,
    replyTo,
    input,
    trigger,
    steps,
  }),
  output: sequence,
  handler: (i, { core, actor }) => core.sequences.create(actor, i),
});

export const readSequence = defineOperation({
  name: 'sequences.get',
  method: 'GET',
  path: '/api/sequences/:id',
  auth: AUTH,
  summary: 'One sequence (by id or name) with its current version.',
  params: z.object({ id: sequenceRef }),
  output: sequence,
  handler: (i, { core, actor }) => core.sequences.get(actor, i.id),
});

export const updateSequence = defineOperation({
  name: 'sequences.update',
  method: 'PATCH',
  path: '/api/sequences/:id',
  auth: AUTH,
  summary:
    'Change name, status or steps. A change to the definition of a sequence that is not a draft adds a version; running enrolments keep theirs.',
  params: z.object({ id: sequenceRef }),
  body: z.strictObject({
    name: z
      .string()
      .min(1)
      .max(200)
      .refine((n) => !n.startsWith('seq_'), 'names cannot look like an id (seq_…)')
      .optional(),
    status: status.optional(),
    from: from.optional(),
    replyTo,
    input,
    trigger: trigger.optional(),
    steps: steps.optional(),
  }),
  output: sequence,
  handler: ({ id, ...patch }, { core, actor }) => core.sequences.update(actor, id, patch),
});

export const deleteSequence = defineOperation({
  name: 'sequences.delete',
  method: 'DELETE',
  path: '/api/sequences/:id',
  auth: AUTH,
  summary: 'Delete a draft; other sequences are archived (PATCH status archived).',
  params: z.object({ id: sequenceRef }),
  output: okSchema,
  handler: (i, { core, actor }) => core.sequences.remove(actor, i.id),
});

export const listEnrolments = defineOperation({
  name: 'sequences.enrolments',
  method: 'GET',
  path: '/api/sequences/:id/enrolments',
  auth: AUTH,
  summary: 'Enrolments of a sequence, newest first; page with `before` (the last id seen).',
  params: z.object({ id: sequenceRef }),
  query: z.object({
    status: enrolment.shape.status.optional(),
    before: enrolmentId.optional(),
    limit: z.coerce.number().int().min(1).max(500).default(100),
  }),
  output: z.array(enrolment),
  handler: ({ id, ...q }, { core, actor }) => core.sequences.listEnrolments(actor, id, q),
});

export const readEnrolment = defineOperation({
  name: 'enrolments.get',
  method: 'GET',
  path: '/api/enrolments/:id',
  auth: AUTH,
  summary: 'One enrolment: steps done with times, and the current step (live from the workflow while it runs).',
  params: z.object({ id: enrolmentId }),
  output: enrolmentDetail,
  handler: (i, { core, actor }) => core.sequences.getEnrolment(actor, i.id),
});

export const cancelEnrolment = defineOperation({
  name: 'enrolments.cancel',
  method: 'POST',
  path: '/api/enrolments/:id/cancel',
  auth: AUTH,
  summary: 'Stop a running enrolment; answers it once closed. 409 not_running when it has ended.',
  params: z.object({ id: enrolmentId }),
  output: enrolment,
  handler: (i, { core, actor }) => core.sequences.cancelEnrolment(actor, i.id),
});
