import { sql } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import type { AccountService } from '../accounts.js';
import type { AttachmentService } from '../attachments/service.js';
import type { DomainRow } from '../domains/dto.js';
import type { Actor } from '../domains/service.js';
import { AppError, forbidden, notFound, tooMany } from '../errors.js';
import { newId } from '../ids.js';
import type { OutboundQueue } from '../outbound/queue.js';
import type { TemplateService } from '../templates/service.js';
import type { MergeData } from '../templates/merge.js';
import { secondsToMidnight, type UsageService } from '../usage.js';
import { domainOf, formatMailbox, parseMailbox, parseMailboxes, type Mailbox } from './addresses.js';
import { checkHeaders, composeContent } from './compose.js';
import { bareAddress } from './recipients.js';
import { loadSendContext } from './context.js';
import type { ScheduledSendService } from './scheduled.js';
import { parseScheduledAt } from './schedule-time.js';
import type { SuppressionService } from './suppressions.js';
import type { Tracking } from './tracking.js';
import type { ContactService } from '../contacts/service.js';
import type { SendEnrolments } from '../sequences/send-enrolment.js';

export type AttachmentSpec = { filename: string; url?: string; content?: string; contentType?: string };
export type Scalar = string | number | boolean | null;
export type SendInput = {
  from: string; to: string | string[]; subject?: string; html?: string; text?: string; templateId?: string; templateData?: MergeData;
  cc?: string | string[]; bcc?: string | string[]; replyTo?: string; inReplyTo?: string; headers?: Record<string, string>;
  metadata?: Record<string, Scalar>; sequence?: string; sequenceInput?: Record<string, Scalar>; attachments?: AttachmentSpec[];
  scheduledAt?: string | number; trackOpens?: boolean; trackClicks?: boolean;
};
export type BatchInput = Omit<SendInput, 'to' | 'cc' | 'bcc' | 'metadata' | 'sequence' | 'sequenceInput'> & {
  recipients: { to: string; templateData?: MergeData; headers?: Record<string, string> }[];
};
type MessageValues = typeof schema.messages.$inferInsert;
export type BatchResult = { to: string; status: 'sent' | 'scheduled' | 'failed'; id?: string; error?: string; code?: string };

/** What is shared by every message of one call: the checked sender, template, attachments, schedule. */
type Prepared = {
  user: { id: string; plan: string }; domain: DomainRow; from: Mailbox; template?: { subject: string | null; html: string | null; text: string | null };
  attachments: MessageValues['attachments']; scheduledAt?: number; trackOpens: boolean; trackClicks: boolean;
  suppressed: Set<string>; room: { daily: number; monthly: number };
};

/** The accept path of POST /v1/send and /v1/send/batch: every gate, then one transaction, then the queue. */
export function createSendService(deps: {
  db: Db; accounts: AccountService; usage: UsageService; suppressions: SuppressionService; templates: TemplateService;
  attachments: AttachmentService; tracking: Tracking; queue: OutboundQueue; scheduled: ScheduledSendService; contacts: ContactService;
  enrolments: SendEnrolments;
}) {
  const { db } = deps;

  async function prepare(actor: Actor, input: SendInput | BatchInput, recipients: string[]): Promise<Prepared> {
    const from = parseMailbox(input.from, 'from');
    const ctx = await loadSendContext(db, { userId: actor.userId, domain: domainOf(from.address), emails: recipients });
    if (!ctx) throw notFound('Account not found');
    if (!ctx.emailVerified) throw forbidden('Verify the account email before sending (see GET /v1/me)', 'email_not_verified');
    const user = { id: actor.userId, plan: ctx.plan };
    const domain = ctx.domain?.id ? ctx.domain : undefined;
    const usable = domain && domain.sendingEnabled && domain.spfVerified === 1 && domain.dkimVerified === 1 && (!actor.domainId || actor.domainId === domain.id);
    if (!usable) throw forbidden(`${domainOf(from.address)} is not a verified sending domain for this credential`, 'domain_not_verified');
    const template = input.templateId ? await deps.templates.resolve(actor.userId, input.templateId) : undefined;
    const when = input.scheduledAt === undefined ? undefined : parseScheduledAt(input.scheduledAt);
    // Inline content is kept until 7 days past the scheduled time, so a late send still finds it.
    const attachments = input.attachments?.length ? await deps.attachments.prepareForSend(actor.userId, input.attachments, { keepUntil: when }) : null;
    return {
      user, domain, from, template, attachments, suppressed: ctx.suppressed, room: deps.usage.headroomOf(ctx.plan, ctx),
      scheduledAt: when !== undefined && when > Date.now() + 1000 ? when : undefined,
      trackOpens: input.trackOpens ?? domain.trackOpens === 1, trackClicks: input.trackClicks ?? false,
    };
  }

  /** Builds one message row (ids, merged content, tracking) from the shared parts and one recipient's parts. */
  function build(p: Prepared, m: { to: Mailbox[]; cc: Mailbox[]; bcc: Mailbox[]; explicit: SendInput | BatchInput; data?: MergeData; headers: Record<string, string>; metadata?: Record<string, Scalar> }): MessageValues {
    const id = newId('msg');
    const content = composeContent(m.explicit, p.template, m.data);
    const html = content.html && (p.trackOpens || p.trackClicks) ? deps.tracking.instrumentHtml(content.html, id, { opens: p.trackOpens, clicks: p.trackClicks }) : content.html;
    const now = Date.now();
    return {
      id, userId: p.user.id, direction: 'outbound', kind: 'user', domainId: p.domain.id, fromAddr: formatMailbox(p.from),
      toAddrs: m.to.map(formatMailbox), ccAddrs: m.cc.map(formatMailbox), bccAddrs: m.bcc.map(formatMailbox),
      replyTo: m.explicit.replyTo ? formatMailbox(parseMailbox(m.explicit.replyTo, 'replyTo')) : null, subject: content.subject, html, text: content.text,
      headers: m.headers, metadata: m.metadata ?? null, inReplyTo: m.explicit.inReplyTo ?? null,
      trackOpens: +p.trackOpens, trackClicks: +p.trackClicks, attachments: p.attachments,
      status: p.scheduledAt ? 'scheduled' : 'queued', createdAt: now, updatedAt: now,
    };
  }

  /** Recipients become contacts (last seen now): one upsert per accepted call, off the answer's path. */
  function touchContacts(userId: string, rows: MessageValues[]) {
    const emails = rows.flatMap((r) => [...r.toAddrs, ...(r.ccAddrs ?? []), ...(r.bccAddrs ?? [])]).map(bareAddress);
    deps.contacts.touch(userId, emails).catch((err: Error) => console.error('[contacts] could not record recipients as contacts:', err.message));
  }

  /** Inserts the rows and counts them against the plan in one transaction; then queues or schedules them. */
  async function commit(p: Prepared, rows: MessageValues[]): Promise<Map<string, string>> {
    const ssnd = new Map<string, string>();
    const recipients = rows.reduce((n, r) => n + recipientCount(r), 0);
    if (!p.scheduledAt && !deps.usage.capped(p.user.plan)) {
      if (rows.length === 0) return ssnd;
      // One statement: the rows and the counters commit together without a transaction's extra round trips.
      const accepted = db.$with('accepted', { id: sql<string>`id` }).as(db.insert(schema.messages).values(rows).returning({ id: schema.messages.id }).getSQL());
      await deps.usage.consume(db.with(accepted), p.user.id, recipients, { outbound: true });
      deps.queue.enqueue(rows.map((r) => r.id!), p.user.id);
      return ssnd;
    }
    await db.transaction(async (tx) => {
      const hit = await deps.usage.reserve(tx, p.user.id, p.user.plan, recipients);
      if (hit) throw limitError(hit === 'daily' ? { daily: 0, monthly: 1 } : { daily: 1, monthly: 0 })!;
      if (rows.length) await tx.insert(schema.messages).values(rows);
      if (p.scheduledAt) for (const r of rows) ssnd.set(r.id!, await deps.scheduled.insert(tx, { userId: p.user.id, messageId: r.id!, scheduledAt: p.scheduledAt }));
    });
    if (p.scheduledAt) await deps.scheduled.startAll([...ssnd].map(([messageId, id]) => ({ id, messageId, userId: p.user.id, scheduledAt: p.scheduledAt! })));
    else deps.queue.enqueue(rows.map((r) => r.id!), p.user.id);
    return ssnd;
  }

  /** Recipients of one message row: what the plan counts. */
  const recipientCount = (r: MessageValues) => (r.toAddrs?.length ?? 0) + (r.ccAddrs?.length ?? 0) + (r.bccAddrs?.length ?? 0);

  function limitError(room: { daily: number; monthly: number }, need = 1): AppError | undefined {
    if (room.monthly < need) return new AppError(402, 'monthly_quota_exceeded', 'The monthly email bucket of this plan is used up');
    if (room.daily < need) return tooMany('The daily send cap of this plan is reached', 'daily_limit', secondsToMidnight());
    return undefined;
  }

  return {
    async send(actor: Actor, input: SendInput) {
      const enrol = input.sequence ? await deps.enrolments.resolve(actor.userId, { ...input, sequence: input.sequence }) : undefined;
      const to = parseMailboxes(input.to, 'to');
      const cc = parseMailboxes(input.cc, 'cc');
      const bcc = parseMailboxes(input.bcc, 'bcc');
      const p = await prepare(actor, input, [...to, ...cc, ...bcc].map((m) => m.address));
      if (p.suppressed.size) throw new AppError(422, 'recipient_suppressed', `Suppressed recipient(s): ${[...p.suppressed].join(', ')}`);
      const over = limitError(p.room, to.length + cc.length + bcc.length);
      if (over) throw over;
      const row = build(p, { to, cc, bcc, explicit: input, data: input.templateData, headers: checkHeaders(input.headers), metadata: input.metadata });
      // Enrolment rows go first: the enrolment checks that its message committed, so a failed commit enrolls nobody.
      const owed = enrol ? await deps.enrolments.write(p.user.id, enrol, { messageId: row.id!, from: row.fromAddr, subject: row.subject ?? '', to: to.map((m) => m.address) }) : [];
      const ssnd = await commit(p, [row]).catch(async (err) => {
        if (owed.length) await deps.enrolments.discard(owed).catch(() => undefined); // else the sweep finds no message and enrolls nobody
        throw err;
      });
      if (owed.length) deps.enrolments.handOver(owed);
      touchContacts(p.user.id, [row]);
      return p.scheduledAt
        ? { id: ssnd.get(row.id!)!, status: 'scheduled' as const, scheduledAt: p.scheduledAt }
        : { id: row.id!, status: 'queued' as const };
    },

    async sendBatch(actor: Actor, input: BatchInput) {
      const parsed = input.recipients.map((r, i) => {
        try {
          return parseMailbox(r.to, `recipients[${i}].to`);
        } catch (err) {
          return err as AppError;
        }
      });
      const p = await prepare(actor, input, parsed.flatMap((m) => (m instanceof AppError ? [] : [m.address])));
      const shared = checkHeaders(input.headers);
      let room = p.room;
      const blocked = p.suppressed;
      const results: BatchResult[] = [];
      const rows: MessageValues[] = [];
      for (const [i, r] of input.recipients.entries()) {
        try {
          const to = parsed[i]!;
          if (to instanceof AppError) throw to;
          if (blocked.has(to.address)) throw new AppError(422, 'recipient_suppressed', `${to.address} is suppressed`);
          const over = limitError(room);
          if (over) throw over;
          const data = { ...input.templateData, ...r.templateData };
          const row = build(p, { to: [to], cc: [], bcc: [], explicit: input, data, headers: { ...shared, ...checkHeaders(r.headers, `recipients[${i}].headers`) } });
          room = { daily: room.daily - 1, monthly: room.monthly - 1 };
          rows.push(row);
          results.push({ to: r.to, status: p.scheduledAt ? 'scheduled' : 'sent', id: row.id! });
        } catch (err) {
          if (!(err instanceof AppError)) throw err;
          results.push({ to: r.to, status: 'failed', error: err.message, code: err.code });
        }
      }
      const ssnd = await commit(p, rows);
      if (rows.length) touchContacts(p.user.id, rows);
      for (const res of results) if (res.status === 'scheduled') res.id = ssnd.get(res.id!)!;
      const count = (s: string) => results.filter((r) => r.status === s).length;
      return { results, sent: count('sent'), scheduled: count('scheduled'), failed: count('failed') };
    },
  };
}
export type SendService = ReturnType<typeof createSendService>;
