import { and, desc, eq, inArray } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { AppError, badRequest, conflict, notFound } from '../errors.js';
import { newId } from '../ids.js';
import type { BroadcastWorkflows } from '../ports/broadcasts.js';
import { domainOf, formatMailbox, parseMailbox } from '../mail/addresses.js';
import { capRefusal, type SendGate } from '../gate/gate.js';
import { parseScheduledAt } from '../mail/schedule-time.js';
import type { TemplateService } from '../templates/service.js';
import type { UsageService } from '../usage.js';
import { checkAudience, countAudience, type Audience } from './audience.js';
import { runParse } from '../parsing/pool.js';
import type { BroadcastContent } from '../render/broadcast.js';
import type { Actor } from '../tenancy.js';

type Row = typeof schema.broadcasts.$inferSelect;
export type BroadcastFields = {
  name?: string;
  from?: string;
  replyTo?: string | null;
  subject?: string;
  preview?: string | null;
  audience?: Audience;
  templateId?: string | null;
  html?: string | null;
  text?: string | null;
  footerAddress?: string | null;
};

const b = schema.broadcasts;
const OPEN = ['scheduled', 'sending'] as const;
/** What rendering reads of a broadcast (the rest of the row stays out of the parse pool's task). */
const contentOf = (row: Row, template: BroadcastContent['template']): BroadcastContent => ({
  subject: row.subject,
  preview: row.preview,
  html: row.html,
  text: row.text,
  footerAddress: row.footerAddress,
  template,
});

/** SPEC.md's Broadcast record: snake_case, audience as a JSON string. */
export const broadcastDto = (r: Row) => ({
  id: r.id,
  user_id: r.userId,
  name: r.name,
  from_addr: r.fromAddr,
  reply_to: r.replyTo,
  subject: r.subject,
  preview: r.preview,
  audience: JSON.stringify(r.audience),
  template_id: r.templateId,
  html: r.html,
  text: r.text,
  footer_address: r.footerAddress,
  status: r.status,
  scheduled_at: r.scheduledAt,
  audience_count: r.audienceCount,
  sent_count: r.sentCount,
  fail_count: r.failCount,
  skip_count: r.skipCount,
  sent_at: r.sentAt,
  created_at: r.createdAt,
  updated_at: r.updatedAt,
});

/** Broadcasts: drafts (only they may change), sending now or at a time, cancel, and progress from the running workflow. */
export function createBroadcastService(deps: {
  db: Db;
  workflows: BroadcastWorkflows;
  templates: TemplateService;
  defaultFooterAddress: string | undefined;
  gate: SendGate;
  usage: UsageService;
}) {
  const { db } = deps;

  async function load(userId: string, id: string): Promise<Row> {
    const [row] = await db
      .select()
      .from(b)
      .where(and(eq(b.userId, userId), eq(b.id, id)));
    if (!row) throw notFound('Broadcast not found');
    return row;
  }
  const draftOnly = (row: Row, verb: string) => {
    if (row.status !== 'draft')
      throw conflict(`Only drafts can be ${verb}; this broadcast is ${row.status}`, 'not_draft');
  };
  /** Checks and normalizes the writable fields. */
  async function fields(userId: string, f: BroadcastFields): Promise<Partial<typeof b.$inferInsert>> {
    const out: Partial<typeof b.$inferInsert> = {};
    if (f.from !== undefined) out.fromAddr = formatMailbox(parseMailbox(f.from, 'from'));
    if (f.replyTo !== undefined)
      out.replyTo = f.replyTo === null ? null : formatMailbox(parseMailbox(f.replyTo, 'replyTo'));
    if (f.audience !== undefined) out.audience = await checkAudience(db, userId, f.audience);
    if (f.templateId) await deps.templates.resolve(userId, f.templateId);
    for (const k of ['name', 'subject', 'preview', 'templateId', 'html', 'text', 'footerAddress'] as const)
      if (f[k] !== undefined) (out as Record<string, unknown>)[k] = f[k];
    if (out.subject !== undefined && /[\r\n]/.test(out.subject ?? ''))
      throw badRequest('subject: no line breaks', 'validation_error');
    return out;
  }

  /** Everything a send needs before it is accepted: the send gate's account and sender rules, content, a valid audience. */
  async function checkSendable(row: Row) {
    const verdict = await deps.gate.judge({
      userId: row.userId,
      sender: { name: domainOf(parseMailbox(row.fromAddr, 'from').address) },
    });
    if (verdict instanceof AppError) throw verdict;
    const template = row.templateId ? await deps.templates.resolve(row.userId, row.templateId) : undefined;
    // Rendered once in the parse pool (a template past its budget is refused 422 `parse_budget_exceeded`).
    await runParse('renderBroadcast', {
      content: contentOf(row, template),
      recipients: [
        {
          recipient: { email: 'check@example.com', name: null, attributes: {} },
          unsubscribeUrl: 'https://example.com/u',
        },
      ],
    });
    return { plan: verdict.plan, audience: await checkAudience(db, row.userId, row.audience as Audience) };
  }

  /**
   * Refuses a broadcast whose audience is larger than the plan's room on the day it goes out (now, or its
   * scheduled day), with the count. Only an early answer: the fan-out reserves each batch and fails the
   * recipients a cap does not take.
   */
  async function checkRoom(userId: string, plan: string, count: number, at?: number) {
    const room = await deps.usage.headroom(userId, plan, at);
    const hit = count > room.monthly ? ('monthly' as const) : count > room.daily ? ('daily' as const) : undefined;
    if (!hit) return;
    const left = hit === 'monthly' ? room.monthly : room.daily;
    const when =
      at !== undefined
        ? `on ${new Date(at).toISOString().slice(0, 10)} (UTC)`
        : hit === 'daily'
          ? 'today'
          : 'this month';
    const cap = capRefusal(hit, at);
    const text = `This broadcast goes to ${count} recipients; the plan's ${hit === 'daily' ? 'daily send cap' : 'monthly email bucket'} allows ${left} more ${when}`;
    throw new AppError(cap.status, cap.code, text, cap.retryable, cap.details);
  }

  return {
    async list({ userId }: Actor) {
      return (await db.select().from(b).where(eq(b.userId, userId)).orderBy(desc(b.createdAt), desc(b.id))).map(
        broadcastDto,
      );
    },

    async create({ userId }: Actor, f: BroadcastFields & { from: string }) {
      const values = await fields(userId, { audience: { type: 'all' }, ...f });
      const [user] = await db
        .select({ footer: schema.users.footerAddress })
        .from(schema.users)
        .where(eq(schema.users.id, userId));
      const now = Date.now();
      const [row] = await db
        .insert(b)
        .values({
          id: newId('bct'),
          userId,
          name: f.name ?? f.subject ?? 'Untitled broadcast',
          fromAddr: values.fromAddr!,
          audience: values.audience!,
          ...values,
          footerAddress:
            f.footerAddress !== undefined ? f.footerAddress : (user?.footer ?? deps.defaultFooterAddress ?? null),
          subject: values.subject ?? '',
          status: 'draft',
          createdAt: now,
          updatedAt: now,
        })
        .returning();
      return broadcastDto(row!);
    },

    /** The row, with live counts from the running workflow's `progressQuery` (the row's when it is closed or does not answer). */
    async get({ userId }: Actor, id: string) {
      const row = await load(userId, id);
      const live = (OPEN as readonly string[]).includes(row.status)
        ? await deps.workflows.broadcastProgress(id).catch(() => undefined)
        : undefined;
      const dto = broadcastDto(row);
      if (!live) {
        const done = row.sentCount + row.failCount + row.skipCount;
        return {
          ...dto,
          progress: {
            live: false,
            sent: row.sentCount,
            failed: row.failCount,
            skipped: row.skipCount,
            remaining: row.audienceCount === null ? null : Math.max(0, row.audienceCount - done),
            current_batch: null,
          },
        };
      }
      return {
        ...dto,
        sent_count: live.sent,
        fail_count: live.failed,
        skip_count: live.skipped,
        progress: {
          live: true,
          sent: live.sent,
          failed: live.failed,
          skipped: live.skipped,
          remaining: live.remaining,
          current_batch: live.currentBatch,
        },
      };
    },

    async update({ userId }: Actor, id: string, f: BroadcastFields) {
      draftOnly(await load(userId, id), 'edited');
      const values = await fields(userId, f);
      const [row] = await db
        .update(b)
        .set({ ...values, updatedAt: Date.now() })
        .where(and(eq(b.id, id), eq(b.status, 'draft')))
        .returning();
      if (!row) throw conflict('Only drafts can be edited', 'not_draft');
      return broadcastDto(row);
    },

    async remove({ userId }: Actor, id: string) {
      draftOnly(await load(userId, id), 'deleted');
      const gone = await db
        .delete(b)
        .where(and(eq(b.id, id), eq(b.status, 'draft')))
        .returning({ id: b.id });
      if (gone.length === 0) throw conflict('Only drafts can be deleted', 'not_draft');
      return { ok: true as const };
    },

    /** draft → scheduled (future `scheduledAt`) or sending: counts the audience and starts the fan-out workflow. */
    async send({ userId }: Actor, id: string, scheduledAt?: string | number) {
      const row = await load(userId, id);
      if (row.status !== 'draft')
        throw conflict(`This broadcast is ${row.status} already; only drafts can be sent`, 'not_draft');
      const { plan, audience } = await checkSendable(row);
      const when = scheduledAt === undefined ? undefined : parseScheduledAt(scheduledAt);
      const scheduled = when !== undefined && when > Date.now() + 1000;
      const audienceCount = await countAudience(db, userId, audience);
      await checkRoom(userId, plan, audienceCount, scheduled ? when : undefined);
      const status = scheduled ? ('scheduled' as const) : ('sending' as const);
      const [moved] = await db
        .update(b)
        .set({ status, scheduledAt: scheduled ? when : null, audienceCount, updatedAt: Date.now() })
        .where(and(eq(b.id, id), eq(b.status, 'draft')))
        .returning();
      if (!moved) throw conflict('This broadcast is being sent already', 'not_draft');
      try {
        await deps.workflows.startBroadcast({ broadcastId: id, userId, scheduledAt: scheduled ? when : undefined });
      } catch (err) {
        await db.update(b).set({ status: 'draft', scheduledAt: null, audienceCount: null }).where(eq(b.id, id));
        throw err;
      }
      return { id, status, ...(scheduled ? { scheduledAt: when } : {}), audienceCount };
    },

    /** Sends `cancelSignal` to the run; answers once the broadcast is closed (or after a few seconds, still closing). */
    async cancel({ userId }: Actor, id: string) {
      const row = await load(userId, id);
      if (!(OPEN as readonly string[]).includes(row.status))
        throw conflict(`A ${row.status} broadcast cannot be canceled`, 'not_cancelable');
      const running = await deps.workflows.cancelBroadcast(id);
      if (!running)
        await db
          .update(b)
          .set({ status: 'canceled', updatedAt: Date.now() })
          .where(and(eq(b.id, id), inArray(b.status, [...OPEN])));
      const deadline = Date.now() + 5000;
      for (;;) {
        const now = await load(userId, id);
        if (!(OPEN as readonly string[]).includes(now.status) || Date.now() > deadline) return broadcastDto(now);
        await new Promise((r) => setTimeout(r, 100));
      }
    },
  };
}
export type BroadcastService = ReturnType<typeof createBroadcastService>;
