import { and, desc, eq, inArray, lt } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import type { Actor } from '../tenancy.js';
import { conflict, notFound, unavailable, type AppError } from '../errors.js';
import { newId } from '../ids.js';
import type { ScheduledSendWorkflows } from '../ports/sending.js';
import type { UsageService } from '../usage.js';
import { failedEvent, refusalsAtDeparture } from '../gate/departure.js';
import type { EventService } from '../message-events.js';
import { refusalNote } from '../gate/gate.js';

type Tx = Pick<Db, 'insert'>;
export type ScheduledStart = { id: string; messageId: string; userId: string; scheduledAt: number };

/**
 * Scheduled sends (`ssnd_`): rows, their workflows, and the cancel that answers definitively. The send
 * path reserved the message's recipients against the caps of the day it is scheduled for; a send that
 * ends without going out (canceled, refused at release, never started) gives that reservation back.
 */
export function createScheduledSendService(deps: {
  db: Db;
  workflows: ScheduledSendWorkflows;
  usage: UsageService;
  events: EventService;
}) {
  const { db } = deps;
  const s = schema.scheduledSends;
  const m = schema.messages;

  /**
   * Moves a still-scheduled send to `status` (its message to `messageStatus`) and gives its reservation back; false when it had moved on.
   * A `refusal` (the gate at release) is the message's `last_error` and its `email.failed` event.
   */
  async function closeUnsent(
    id: string,
    status: 'canceled' | 'failed',
    messageStatus: 'canceled' | 'failed',
    note: string | null = null,
    refusal?: AppError,
  ): Promise<boolean> {
    let wake: (() => void) | undefined;
    const closed = await db.transaction(async (tx) => {
      const now = Date.now();
      const [row] = await tx
        .update(s)
        .set({ status, updatedAt: now })
        .where(and(eq(s.id, id), eq(s.status, 'scheduled')))
        .returning();
      if (!row) return false;
      const [msg] = await tx
        .update(m)
        .set({ status: messageStatus, lastError: refusal ? refusalNote(refusal) : note, updatedAt: now })
        .where(eq(m.id, row.messageId))
        .returning({ id: m.id, userId: m.userId, domainId: m.domainId, to: m.toAddrs, cc: m.ccAddrs, bcc: m.bccAddrs });
      if (msg)
        await deps.usage.refund(
          tx,
          row.userId,
          msg.to.length + (msg.cc?.length ?? 0) + (msg.bcc?.length ?? 0),
          row.scheduledAt,
        );
      if (msg && refusal) {
        const event = deps.events.prepare([failedEvent(msg, refusal)]);
        const inserted = await tx.insert(schema.events).values(event.rows).returning(event.returning);
        wake = () => event.notify(inserted);
      }
      return true;
    });
    wake?.(); // after the commit: a webhook dispatcher woken earlier could miss the event
    return closed;
  }

  async function find(actor: Actor, id: string) {
    const [row] = await db
      .select({ s, m })
      .from(s)
      .innerJoin(m, eq(m.id, s.messageId))
      .where(and(eq(s.id, id), eq(s.userId, actor.userId)));
    if (!row || (actor.domainId && row.m.domainId !== actor.domainId)) throw notFound('Scheduled send not found');
    return row;
  }
  const dto = ({ s: r, m: msg }: { s: typeof s.$inferSelect; m: typeof m.$inferSelect }) => ({
    id: r.id,
    messageId: r.messageId,
    status: r.status,
    scheduledAt: r.scheduledAt,
    createdAt: r.createdAt,
    updatedAt: r.updatedAt,
    from: msg.fromAddr,
    to: msg.toAddrs,
    subject: msg.subject,
  });

  return {
    async insert(tx: Tx, v: { userId: string; messageId: string; scheduledAt: number }): Promise<string> {
      const id = newId('ssnd');
      const now = Date.now();
      await tx.insert(s).values({
        id,
        userId: v.userId,
        messageId: v.messageId,
        scheduledAt: v.scheduledAt,
        status: 'scheduled',
        createdAt: now,
        updatedAt: now,
      });
      return id;
    },

    /** Starts one workflow per scheduled send and marks it started; a start that fails cancels its row and answers 503. */
    async startAll(items: ScheduledStart[]): Promise<void> {
      const failed: string[] = [];
      const started: string[] = [];
      await Promise.all(
        items.map(async (it) => {
          try {
            await deps.workflows.startScheduledSend(it);
            started.push(it.id);
          } catch {
            failed.push(it.id);
            await closeUnsent(
              it.id,
              'failed',
              'canceled',
              'scheduler_unavailable: the scheduler did not take the send',
            );
          }
        }),
      );
      if (started.length) await db.update(s).set({ started: true }).where(inArray(s.id, started));
      if (failed.length)
        throw unavailable(`Could not schedule ${failed.length} message(s): the scheduler is unavailable`);
    },

    /**
     * The scheduled-send sweep: starts the workflows a crash left unstarted (between commit and start),
     * and writes `canceled` on rows whose workflow an operator terminated before it sent.
     */
    async sweep(opts: { olderThanMs: number; limit: number }): Promise<{ started: number; canceled: number }> {
      const now = Date.now();
      const unstarted = await db
        .select()
        .from(s)
        .where(and(eq(s.status, 'scheduled'), eq(s.started, false), lt(s.createdAt, now - opts.olderThanMs)))
        .limit(opts.limit);
      for (const r of unstarted)
        await deps.workflows.startScheduledSend({
          id: r.id,
          messageId: r.messageId,
          userId: r.userId,
          scheduledAt: r.scheduledAt,
        });
      if (unstarted.length)
        await db
          .update(s)
          .set({ started: true })
          .where(
            inArray(
              s.id,
              unstarted.map((r) => r.id),
            ),
          );
      const overdue = await db
        .select()
        .from(s)
        .where(and(eq(s.status, 'scheduled'), eq(s.started, true), lt(s.scheduledAt, now - opts.olderThanMs)))
        .limit(opts.limit);
      let canceled = 0;
      for (const r of overdue) {
        if ((await deps.workflows.scheduledSendState(r.id)) === 'running') continue;
        await this.markCanceled(r.id);
        canceled += 1;
      }
      return { started: unstarted.length, canceled };
    },

    async list(actor: Actor, opts: { limit: number; status?: string }) {
      const rows = await db
        .select({ s, m })
        .from(s)
        .innerJoin(m, eq(m.id, s.messageId))
        .where(
          and(
            eq(s.userId, actor.userId),
            ...(actor.domainId ? [eq(m.domainId, actor.domainId)] : []),
            ...(opts.status ? [eq(s.status, opts.status as 'scheduled')] : []),
          ),
        )
        .orderBy(desc(s.scheduledAt))
        .limit(opts.limit);
      return rows.map(dto);
    },

    get: async (actor: Actor, id: string) => dto(await find(actor, id)),

    /** Cancels through the workflow's update: `canceled`, or 409 `too_late` once sending started. */
    async cancel(actor: Actor, id: string) {
      const row = await find(actor, id);
      if (row.s.status === 'canceled') return { ok: true as const, id, status: 'canceled' as const };
      if (row.s.status !== 'scheduled') throw conflict(`Too late to cancel: the send is ${row.s.status}`, 'too_late');
      const outcome = await deps.workflows.cancelScheduledSend(id);
      if (outcome === 'unavailable')
        throw unavailable(
          'The scheduler did not answer in time; the cancel may still apply. Try again to learn the outcome.',
          'scheduler_unavailable',
        );
      if (outcome === 'closed') {
        // Its workflow ended without sending (an operator terminated it): the row says canceled.
        await this.markCanceled(id);
        const [cur] = await db.select({ status: s.status }).from(s).where(eq(s.id, id));
        if (cur?.status === 'canceled') return { ok: true as const, id, status: 'canceled' as const };
        throw conflict(`Too late to cancel: the send is ${cur?.status}`, 'too_late');
      }
      if (outcome === 'too_late') throw conflict('Too late to cancel: sending has already started', 'too_late');
      return { ok: true as const, id, status: 'canceled' as const };
    },

    /**
     * Workflow step when the time comes: the send gate judges the message again as it leaves (the account
     * verified and not suspended, the sender domain, the scoped key that sent it; the caps were reserved at
     * schedule time), then the row and its message are claimed for this run (`sending` with the run's id,
     * so the outbound sweep never takes it). False if it was canceled meanwhile, or refused: then both rows
     * say `failed`, the message's `last_error` why, and an `email.failed` event carries the gate's code.
     */
    async release(id: string, workflowId: string): Promise<{ go: boolean; messageId: string }> {
      const [due] = await db
        .select({ status: s.status, message: m })
        .from(s)
        .innerJoin(m, eq(m.id, s.messageId))
        .where(eq(s.id, id));
      if (due?.status === 'scheduled') {
        const refusal = (await refusalsAtDeparture(db, [due.message])).get(due.message.id);
        if (refusal) {
          await closeUnsent(id, 'failed', 'failed', null, refusal);
          return { go: false, messageId: due.message.id };
        }
      }
      const [row] = await db
        .update(s)
        .set({ status: 'sending', updatedAt: Date.now() })
        .where(and(eq(s.id, id), eq(s.status, 'scheduled')))
        .returning();
      if (row) {
        await db.update(m).set({ status: 'sending', workflowId, updatedAt: Date.now() }).where(eq(m.id, row.messageId));
        return { go: true, messageId: row.messageId };
      }
      const [cur] = await db.select().from(s).where(eq(s.id, id));
      return { go: cur?.status === 'sending', messageId: cur?.messageId ?? '' };
    },

    async markCanceled(id: string): Promise<void> {
      await closeUnsent(id, 'canceled', 'canceled');
    },

    async markDone(id: string, ok: boolean): Promise<void> {
      await db
        .update(s)
        .set({ status: ok ? 'sent' : 'failed', updatedAt: Date.now() })
        .where(eq(s.id, id));
    },
  };
}
export type ScheduledSendService = ReturnType<typeof createScheduledSendService>;
