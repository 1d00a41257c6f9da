import { and, asc, eq, inArray, lt } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import type { EnrolmentEvent, EnrolmentStart, Scalar } from '../ports/sequences.js';
import type { SequenceDefinition } from './definition.js';
import type { EnrolmentSignalPort } from '../ports/sequences.js';

/** An outbox row of kind `event`: an application event of a known contact. */
export type EventJob = {
  eventId: string;
  name: string;
  contactId: string;
  email: string;
  payload: Record<string, unknown> | null;
  createdAt: number;
};
/** An outbox row of kind `send`: enrol these recipients of an accepted send. */
export type SendJob = { start: EnrolmentStart };
type OutboxRow = typeof schema.sequenceOutbox.$inferSelect;

/** What the dispatcher needs from Temporal: signal-with-start an enrolment, or signal an open one. */
const o = schema.sequenceOutbox;
const MAX_PENDING = 20_000;
const s = schema.sequences;

/**
 * Hands recorded events and accepted sends to Temporal after their rows commit (SPEC.md: recording is
 * synchronous, enrolment happens after). Group commit like the send path: rows collected while a flush is
 * under way go together in the next one, one signal or signal-with-start per enrolment workflow whatever
 * the number of events for it, and one statement deletes the rows handed over. A crash before that leaves
 * the rows to the sweep; handing a row over twice is harmless (events are used once by id, and the
 * enrolment id is derived from its trigger).
 */
export function createSequenceDispatcher(deps: {
  db: Db;
  port: EnrolmentSignalPort;
  maxBatch?: number;
  concurrency?: number;
  onError?: (err: unknown) => void;
}) {
  const { db } = deps;
  const maxBatch = deps.maxBatch ?? 500;
  const concurrency = deps.concurrency ?? 32;
  const pending: OutboxRow[] = [];
  let running: Promise<void> | undefined;
  let idle: (() => void)[] = [];

  /** The work of a batch of rows: per workflow id, the start (if a trigger or send names it) and the events to signal. */
  async function plan(rows: OutboxRow[]) {
    const work = new Map<string, { start?: EnrolmentStart; events: EnrolmentEvent[]; rows: Set<string> }>();
    let row = '';
    const add = (wid: string, start: EnrolmentStart | undefined, event?: EnrolmentEvent) => {
      const w = work.get(wid) ?? { events: [], rows: new Set<string>() };
      if (start && !w.start) w.start = start;
      if (event) w.events.push(event);
      w.rows.add(row);
      work.set(wid, w);
    };
    const events = rows
      .filter((r) => r.kind === 'event')
      .map((r) => ({ id: r.id, userId: r.userId, job: r.data as unknown as EventJob }));
    for (const r of rows)
      if (r.kind === 'send') {
        const { start } = r.data as unknown as SendJob;
        row = r.id;
        add(deps.port.enrolmentWorkflowId(start.sequenceId, start.contactId), start);
      }
    if (events.length === 0) return work;
    const users = [...new Set(events.map((x) => x.userId))];
    const names = [...new Set(events.map((x) => `event:${x.job.name}`))];
    const triggered = await db
      .select({
        id: s.id,
        userId: s.userId,
        version: s.version,
        trigger: s.triggerEvent,
        definition: schema.sequenceVersions.definition,
      })
      .from(s)
      .innerJoin(
        schema.sequenceVersions,
        and(eq(schema.sequenceVersions.sequenceId, s.id), eq(schema.sequenceVersions.version, s.version)),
      )
      .where(and(inArray(s.userId, users), eq(s.status, 'active'), inArray(s.triggerEvent, names)));
    const running = await db
      .select({
        workflowId: schema.sequenceEnrolments.workflowId,
        contactId: schema.sequenceEnrolments.contactId,
        waitsFor: schema.sequenceEnrolments.waitsFor,
      })
      .from(schema.sequenceEnrolments)
      .where(
        and(
          inArray(schema.sequenceEnrolments.contactId, [...new Set(events.map((x) => x.job.contactId))]),
          eq(schema.sequenceEnrolments.status, 'running'),
        ),
      );
    for (const { id, userId, job } of events) {
      row = id;
      const event: EnrolmentEvent = { id: job.eventId, name: job.name, payload: job.payload, createdAt: job.createdAt };
      for (const seq of triggered) {
        if (seq.userId !== userId || seq.trigger !== `event:${job.name}`) continue;
        const d = seq.definition as unknown as SequenceDefinition;
        const input: Record<string, Scalar> = {};
        for (const [k, t] of Object.entries(d.input ?? {})) {
          const val = job.payload?.[k];
          if (val === null || typeof val === t) input[k] = val as Scalar;
        }
        add(
          deps.port.enrolmentWorkflowId(seq.id, job.contactId),
          {
            sequenceId: seq.id,
            version: seq.version,
            userId,
            contactId: job.contactId,
            email: job.email,
            input,
            trigger: {
              kind: 'event',
              key: job.eventId,
              at: job.createdAt,
              data: { name: job.name, eventId: job.eventId, email: job.email, ...scalars(job.payload) },
            },
          },
          event,
        );
      }
      for (const r of running)
        if (r.contactId === job.contactId && r.waitsFor.includes(job.name)) add(r.workflowId, undefined, event);
    }
    return work;
  }

  /** Hands a batch over; deletes each row once every call it owed succeeded (the others stay for the sweep). */
  async function dispatch(rows: OutboxRow[]): Promise<number> {
    if (rows.length === 0) return 0;
    const work = [...(await plan(rows))];
    const failed = new Set<string>();
    for (let i = 0; i < work.length; i += concurrency) {
      await Promise.all(
        work.slice(i, i + concurrency).map(async ([wid, w]) => {
          try {
            if (w.start) await deps.port.enrolContact(w.start, w.events);
            else await deps.port.signalEnrolment(wid, w.events);
          } catch (err) {
            for (const r of w.rows) failed.add(r);
            deps.onError?.(err);
          }
        }),
      );
    }
    const done = rows.map((r) => r.id).filter((id) => !failed.has(id));
    if (done.length) await db.delete(o).where(inArray(o.id, done));
    return done.length;
  }

  function pump(): void {
    if (running || pending.length === 0) {
      if (!running) idle.splice(0).forEach((fn) => fn());
      return;
    }
    const batch = pending.splice(0, maxBatch);
    running = dispatch(batch)
      .then(
        () => undefined,
        (err) => deps.onError?.(err),
      )
      .finally(() => {
        running = undefined;
        pump();
      });
  }

  return {
    /** Rows committed by the caller: handed over with whatever else is waiting. */
    enqueue(rows: OutboxRow[]) {
      // Bounded: past the cap (Temporal slower than the API for a long while) rows wait in the table for the sweep.
      if (pending.length >= MAX_PENDING) return;
      pending.push(...rows);
      queueMicrotask(pump);
    },
    async drain() {
      if (!running && pending.length === 0) return;
      await new Promise<void>((resolve) => idle.push(resolve));
    },
    /** Hands over rows older than `olderThanMs` (left by a crash, or by a failed call); answers how many. */
    async sweep(olderThanMs: number, limit: number): Promise<number> {
      const rows = await db
        .select()
        .from(o)
        .where(and(eq(o.held, false), lt(o.createdAt, Date.now() - olderThanMs)))
        .orderBy(asc(o.createdAt))
        .limit(limit);
      return dispatch(rows);
    },
    close() {
      idle = [];
    },
  };
}
export type SequenceDispatcher = ReturnType<typeof createSequenceDispatcher>;

function scalars(o: Record<string, unknown> | null): Record<string, Scalar> {
  const out: Record<string, Scalar> = {};
  for (const [k, v] of Object.entries(o ?? {}).slice(0, 50))
    if (v === null || ['string', 'number', 'boolean'].includes(typeof v)) out[k] = v as Scalar;
  return out;
}
