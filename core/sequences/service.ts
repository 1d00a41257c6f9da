import { and, desc, eq } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { badRequest, conflict, forbidden, notFound } from '../errors.js';
import { newId } from '../ids.js';
import { domainOf, parseMailbox } from '../mail/addresses.js';
import type { TemplateService } from '../templates/service.js';
import { olderThan } from '../contacts/service.js';
import { checkBranches, waitedEvents, type SequenceDefinition } from './definition.js';
import type { EnrolmentPort } from '../ports/sequences.js';
import type { Actor } from '../tenancy.js';

export type SequenceStatus = 'draft' | 'active' | 'paused' | 'archived';
type Row = typeof schema.sequences.$inferSelect;
type EnrolmentRow = typeof schema.sequenceEnrolments.$inferSelect;
export type SequencePatch = Partial<SequenceDefinition> & { name?: string; status?: SequenceStatus };
const s = schema.sequences;
const v = schema.sequenceVersions;
const e = schema.sequenceEnrolments;

export const sequenceDto = (r: Row, d: SequenceDefinition) => ({
  id: r.id,
  name: r.name,
  status: r.status,
  version: r.version,
  ...d,
  createdAt: r.createdAt,
  updatedAt: r.updatedAt,
});
export const enrolmentDto = (r: EnrolmentRow) => ({
  id: r.id,
  sequenceId: r.sequenceId,
  version: r.version,
  contactId: r.contactId,
  email: r.email,
  status: r.status,
  currentStep: r.currentStep,
  waitingFor: r.waitingFor,
  steps: r.steps,
  trigger: r.trigger,
  input: r.input,
  exitReason: r.exitReason,
  workflowId: r.workflowId,
  createdAt: r.createdAt,
  updatedAt: r.updatedAt,
  endedAt: r.endedAt,
});

/**
 * Sequences of an account (CRUD with versions) and their enrolments (list, inspect, cancel). A change
 * to the steps of a sequence that is not a draft adds a version; enrolments keep the version they began on.
 */
export function createSequenceService(deps: { db: Db; templates: TemplateService; workflows: EnrolmentPort }) {
  const { db } = deps;

  async function load(userId: string, idOrName: string): Promise<Row> {
    const [row] = await db
      .select()
      .from(s)
      .where(and(eq(s.userId, userId), idOrName.startsWith('seq_') ? eq(s.id, idOrName) : eq(s.name, idOrName)));
    if (!row) throw notFound('Sequence not found', 'sequence_not_found');
    return row;
  }
  async function definitionOf(sequenceId: string, version: number): Promise<SequenceDefinition> {
    const [row] = await db
      .select()
      .from(v)
      .where(and(eq(v.sequenceId, sequenceId), eq(v.version, version)));
    return row!.definition as unknown as SequenceDefinition;
  }

  /** The checks a definition must pass to be saved; `active` also needs a usable sender and existing templates. */
  async function check(userId: string, d: SequenceDefinition, status: SequenceStatus) {
    const problem = checkBranches(d.steps);
    if (problem) throw badRequest(problem, 'invalid_sequence');
    for (const [i, step] of d.steps.entries()) {
      if (step.type !== 'send') continue;
      if (!step.templateId && !step.html && !step.text)
        throw badRequest(`steps[${i}]: give html or text, or a templateId`, 'invalid_sequence');
      if (!step.templateId && !step.subject)
        throw badRequest(`steps[${i}]: subject is required unless the template supplies one`, 'invalid_sequence');
      if (step.templateId) await deps.templates.resolve(userId, step.templateId);
    }
    const from = parseMailbox(d.from, 'from');
    if (status !== 'active') return;
    const [dom] = await db
      .select()
      .from(schema.domains)
      .where(and(eq(schema.domains.userId, userId), eq(schema.domains.domain, domainOf(from.address))));
    if (!dom || !dom.sendingEnabled || dom.spfVerified !== 1 || dom.dkimVerified !== 1) {
      throw forbidden(
        `${domainOf(from.address)} is not a verified sending domain of this account`,
        'domain_not_verified',
      );
    }
  }

  const triggerKey = (d: SequenceDefinition) => (d.trigger.type === 'event' ? `event:${d.trigger.event}` : 'send');

  async function saveVersion(
    tx: Pick<Db, 'insert'>,
    sequenceId: string,
    version: number,
    d: SequenceDefinition,
    replace: boolean,
  ) {
    const values = {
      sequenceId,
      version,
      definition: d as unknown as Record<string, unknown>,
      waitsFor: waitedEvents(d),
      createdAt: Date.now(),
    };
    const q = tx.insert(v).values(values);
    await (replace
      ? q.onConflictDoUpdate({
          target: [v.sequenceId, v.version],
          set: { definition: values.definition, waitsFor: values.waitsFor },
        })
      : q);
  }

  return {
    load: ({ userId }: Actor, idOrName: string) => load(userId, idOrName),
    definitionOf,
    /**
     * A domain-scoped key reaches only the sequences that send from its own domain; any other answers the
     * same 404 as a sequence that does not exist (tenancy: a foreign row is not found, never forbidden).
     */
    async inScope(actor: Actor, ref: { sequenceId: string; version: number }, requested: string): Promise<void> {
      if (!actor.domainId) return;
      const sender = domainOf(parseMailbox((await definitionOf(ref.sequenceId, ref.version)).from, 'from').address);
      const [dom] = await db
        .select({ id: schema.domains.id })
        .from(schema.domains)
        .where(and(eq(schema.domains.userId, actor.userId), eq(schema.domains.domain, sender)));
      if (dom?.id !== actor.domainId) throw notFound(`No sequence named "${requested}"`, 'sequence_not_found');
    },
    async list({ userId }: Actor) {
      const rows = await db
        .select({ s, d: v.definition })
        .from(s)
        .innerJoin(v, and(eq(v.sequenceId, s.id), eq(v.version, s.version)))
        .where(eq(s.userId, userId))
        .orderBy(desc(s.createdAt), desc(s.id));
      return rows.map((r) => sequenceDto(r.s, r.d as unknown as SequenceDefinition));
    },
    async get({ userId }: Actor, id: string) {
      const row = await load(userId, id);
      return sequenceDto(row, await definitionOf(row.id, row.version));
    },
    async create({ userId }: Actor, input: SequenceDefinition & { name: string; status?: SequenceStatus }) {
      const { name, status = 'draft', ...d } = input;
      await check(userId, d, status);
      const now = Date.now();
      const id = newId('seq');
      const row = await db.transaction(async (tx) => {
        const [r] = await tx
          .insert(s)
          .values({ id, userId, name, status, version: 1, triggerEvent: triggerKey(d), createdAt: now, updatedAt: now })
          .onConflictDoNothing()
          .returning();
        if (!r) throw conflict(`A sequence named "${name}" exists already`, 'sequence_exists');
        await saveVersion(tx, id, 1, d, false);
        return r;
      });
      return sequenceDto(row, d);
    },
    /** Changes name, status or definition; a definition change on a non-draft adds a version. */
    async update({ userId }: Actor, id: string, patch: SequencePatch) {
      const row = await load(userId, id);
      const { name, status, ...fields } = patch;
      const current = await definitionOf(row.id, row.version);
      const d: SequenceDefinition = { ...current, ...fields };
      const nextStatus = status ?? row.status;
      await check(userId, d, nextStatus);
      const changed = Object.keys(fields).length > 0 && JSON.stringify(d) !== JSON.stringify(current);
      const version = changed && row.status !== 'draft' ? row.version + 1 : row.version;
      const updated = await db.transaction(async (tx) => {
        if (changed) await saveVersion(tx, row.id, version, d, version === row.version);
        try {
          const [r] = await tx
            .update(s)
            .set({
              name: name ?? row.name,
              status: nextStatus,
              version,
              triggerEvent: triggerKey(d),
              updatedAt: Date.now(),
            })
            .where(and(eq(s.id, row.id), eq(s.version, row.version)))
            .returning();
          if (!r) throw conflict('The sequence changed meanwhile; read it again', 'sequence_changed');
          return r;
        } catch (err) {
          if (
            (err as { code?: string; cause?: { code?: string } }).code === '23505' ||
            (err as { cause?: { code?: string } }).cause?.code === '23505'
          ) {
            throw conflict(`A sequence named "${name}" exists already`, 'sequence_exists');
          }
          throw err;
        }
      });
      return sequenceDto(updated, d);
    },
    /** Deletes a draft that never enrolled anyone; other sequences are archived instead. */
    async remove({ userId }: Actor, id: string) {
      const row = await load(userId, id);
      if (row.status !== 'draft')
        throw conflict('Only drafts can be deleted; archive the sequence instead', 'not_draft');
      await db.transaction(async (tx) => {
        await tx.delete(v).where(eq(v.sequenceId, row.id));
        await tx.delete(s).where(eq(s.id, row.id));
      });
      return { ok: true as const };
    },

    async listEnrolments(
      { userId }: Actor,
      sequenceId: string,
      q: { status?: EnrolmentRow['status']; before?: string; limit: number },
    ) {
      const seq = await load(userId, sequenceId);
      const anchor = q.before
        ? await loadEnrolment(userId, q.before).then((r) => ({ at: r.createdAt, id: r.id }))
        : undefined;
      const rows = await db
        .select()
        .from(e)
        .where(
          and(
            eq(e.userId, userId),
            eq(e.sequenceId, seq.id),
            q.status ? eq(e.status, q.status) : undefined,
            olderThan(e.createdAt, e.id, anchor),
          ),
        )
        .orderBy(desc(e.createdAt), desc(e.id))
        .limit(q.limit);
      return rows.map(enrolmentDto);
    },
    /** One enrolment; while it runs, the current step and what it waits for come from its `stateQuery`. */
    async getEnrolment({ userId }: Actor, id: string) {
      const row = await loadEnrolment(userId, id);
      const dto = enrolmentDto(row);
      const live =
        row.status === 'running'
          ? await deps.workflows.enrolmentState(row.workflowId).catch(() => undefined)
          : undefined;
      if (!live || live.enrolmentId !== row.id) return { ...dto, live: false };
      return { ...dto, currentStep: live.step, waitingFor: live.waitingFor, waitUntil: live.waitUntil, live: true };
    },
    async cancelEnrolment({ userId }: Actor, id: string) {
      const row = await loadEnrolment(userId, id);
      if (row.status !== 'running') throw conflict(`This enrolment is ${row.status} already`, 'not_running');
      const running = await deps.workflows.cancelEnrolment(row.workflowId);
      if (!running) {
        await db
          .update(e)
          .set({ status: 'canceled', exitReason: 'canceled', endedAt: Date.now(), updatedAt: Date.now() })
          .where(and(eq(e.id, row.id), eq(e.status, 'running')));
      }
      const deadline = Date.now() + 5000;
      for (;;) {
        const now = await loadEnrolment(userId, id);
        if (now.status !== 'running' || Date.now() > deadline) return enrolmentDto(now);
        await new Promise((r) => setTimeout(r, 100));
      }
    },
  };

  async function loadEnrolment(userId: string, id: string): Promise<EnrolmentRow> {
    const [row] = await db
      .select()
      .from(e)
      .where(and(eq(e.userId, userId), eq(e.id, id)));
    if (!row) throw notFound('Enrolment not found', 'enrolment_not_found');
    return row;
  }
}
export type SequenceService = ReturnType<typeof createSequenceService>;
