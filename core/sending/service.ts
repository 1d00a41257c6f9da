import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import type { AccountService } from '../accounts.js';
import type { AttachmentService } from '../attachments/service.js';
import type { DomainRow } from '../domains/dto.js';
import type { Actor } from '../tenancy.js';
import { AppError } from '../errors.js';
import { newId } from '../ids.js';
import type { OutboundQueue } from '../transport/queue.js';
import type { TemplateService } from '../templates/service.js';
import type { MergeData } from '../render/merge.js';
import type { LeaseGrant, UsageService } from '../usage.js';
import { acceptDuration, messagesAccepted, since } from '../metrics.js';
import { domainOf, formatMailbox, parseMailbox, parseMailboxes, type Mailbox } from '../mail/addresses.js';
import { checkHeaders } from '../render/compose.js';
import { renderContent } from '../parsing/render.js';
import { bareAddress } from '../mail/recipients.js';
import { createSendContextReader } from './context.js';
import { createAcceptWriter } from './accept-writer.js';
import { CAP_LEASE_MAX, CAP_LEASE_TTL_MS, createCapLeases, isLeaseLost } from '../gate/cap-lease.js';
import { sentByKey } from '../gate/departure.js';
import { accountRefusal, capRefusal, senderRefusal, type SendGate } from '../gate/gate.js';
import type { ScheduledSendService } from './scheduled.js';
import { parseScheduledAt } from '../mail/schedule-time.js';
import type { SuppressionService } from '../gate/suppressions.js';
import type { Tracking } from '../render/tracking.js';
import type { ContactService } from '../contacts/service.js';
import type { SendEnrolments } from '../sequences/send-enrolment.js';
import type { SequenceService } from '../sequences/service.js';
import { log } from '../log.js';

export type AttachmentSpec = { filename: string; url?: string; content?: string; contentType?: string };
export type Scalar = string | number | boolean | null;
export type SendInput = {
  from: string;
  to: string | string[];
  subject?: string;
  html?: string;
  text?: string;
  templateId?: string;
  templateData?: MergeData;
  cc?: string | string[];
  bcc?: string | string[];
  replyTo?: string;
  inReplyTo?: string;
  headers?: Record<string, string>;
  metadata?: Record<string, Scalar>;
  sequence?: string;
  sequenceInput?: Record<string, Scalar>;
  attachments?: AttachmentSpec[];
  scheduledAt?: string | number;
  trackOpens?: boolean;
  trackClicks?: boolean;
};
export type BatchInput = Omit<SendInput, 'to' | 'cc' | 'bcc' | 'metadata' | 'sequence' | 'sequenceInput'> & {
  recipients: { to: string; templateData?: MergeData; headers?: Record<string, string> }[];
};
type MessageValues = typeof schema.messages.$inferInsert;
/** The edge a send came through, as the accept metrics label it. */
export type AcceptSource = 'api' | 'submission';
export type BatchResult = {
  to: string;
  status: 'sent' | 'scheduled' | 'failed';
  id?: string;
  error?: string;
  code?: string;
};

/** What is shared by every message of one call: the checked sender, template, attachments, schedule. */
type Prepared = {
  user: { id: string; plan: string };
  domain: DomainRow;
  from: Mailbox;
  template?: { subject: string | null; html: string | null; text: string | null };
  attachments: MessageValues['attachments'];
  scheduledAt?: number;
  trackOpens: boolean;
  trackClicks: boolean;
  suppressed: Set<string>;
  room: { daily: number; monthly: number };
  /** The domain-scoped key sending, recorded on each row so the gate at departure sees it revoked. */
  keyId?: string;
};

/** The accept path of POST /v1/send and /v1/send/batch: every gate, then one atomic write, then the queue. */
export function createSendService(deps: {
  db: Db;
  accounts: AccountService;
  usage: UsageService;
  suppressions: SuppressionService;
  templates: TemplateService;
  attachments: AttachmentService;
  tracking: Tracking;
  queue: OutboundQueue;
  scheduled: ScheduledSendService;
  contacts: ContactService;
  enrolments: SendEnrolments;
  gate: SendGate;
  sequences: Pick<SequenceService, 'inScope'>;
}) {
  const { db } = deps;
  const writer = createAcceptWriter({ db });
  const contexts = createSendContextReader(db);
  const leases = createCapLeases({ db });

  async function prepare(actor: Actor, input: SendInput | BatchInput, recipients: string[]): Promise<Prepared> {
    const from = parseMailbox(input.from, 'from');
    const ctx = await contexts.load({ userId: actor.userId, domain: domainOf(from.address), emails: recipients });
    // The gate's account and sender rules, over what the one round trip read.
    const domain = ctx?.domain?.id ? ctx.domain : undefined;
    const refused = accountRefusal(ctx) ?? senderRefusal(domain, domainOf(from.address), actor);
    if (refused) throw refused;
    if (!ctx || !domain) throw new Error('unreachable: the gate admitted a sender without an account or domain');
    const user = { id: actor.userId, plan: ctx.plan };
    const template = input.templateId ? await deps.templates.resolve(actor.userId, input.templateId) : undefined;
    const when = input.scheduledAt === undefined ? undefined : parseScheduledAt(input.scheduledAt);
    // Inline content is kept until 7 days past the scheduled time, so a late send still finds it.
    const attachments = input.attachments?.length
      ? await deps.attachments.prepareForSend(actor.userId, input.attachments, { keepUntil: when })
      : null;
    return {
      user,
      domain,
      from,
      template,
      attachments,
      suppressed: ctx.suppressed,
      room: deps.usage.headroomOf(ctx.plan, ctx),
      keyId: actor.keyId,
      scheduledAt: when !== undefined && when > Date.now() + 1000 ? when : undefined,
      trackOpens: input.trackOpens ?? domain.trackOpens === 1,
      trackClicks: input.trackClicks ?? false,
    };
  }

  /** Builds one message row (ids, merged content, tracking) from the shared parts and one recipient's parts. */
  async function build(
    p: Prepared,
    m: {
      to: Mailbox[];
      cc: Mailbox[];
      bcc: Mailbox[];
      explicit: SendInput | BatchInput;
      data?: MergeData;
      headers: Record<string, string>;
      metadata?: Record<string, Scalar>;
    },
  ): Promise<MessageValues> {
    const id = newId('msg');
    const explicit = { subject: m.explicit.subject, html: m.explicit.html, text: m.explicit.text };
    const tracking =
      p.trackOpens || p.trackClicks
        ? { ...deps.tracking.options, messageId: id, opens: p.trackOpens, clicks: p.trackClicks }
        : undefined;
    // Merging and tracking run in the parse pool unless the result is bounded small (core/parsing/render.ts).
    const content = await renderContent({ explicit, template: p.template, data: m.data, tracking });
    const html = content.html;
    const now = Date.now();
    return {
      id,
      userId: p.user.id,
      direction: 'outbound',
      kind: 'user',
      domainId: p.domain.id,
      fromAddr: formatMailbox(p.from),
      toAddrs: m.to.map(formatMailbox),
      ccAddrs: m.cc.map(formatMailbox),
      bccAddrs: m.bcc.map(formatMailbox),
      replyTo: m.explicit.replyTo ? formatMailbox(parseMailbox(m.explicit.replyTo, 'replyTo')) : null,
      subject: content.subject,
      html,
      text: content.text,
      headers: m.headers,
      metadata: m.metadata ?? null,
      inReplyTo: m.explicit.inReplyTo ?? null,
      trackOpens: +p.trackOpens,
      trackClicks: +p.trackClicks,
      attachments: p.attachments,
      status: p.scheduledAt ? 'scheduled' : 'queued',
      createdAt: now,
      updatedAt: now,
      auth: sentByKey(p.keyId),
    };
  }

  /** Recipients become contacts (last seen now): one upsert per accepted call, off the answer's path. */
  function touchContacts(userId: string, rows: MessageValues[]) {
    const emails = rows.flatMap((r) => [...r.toAddrs, ...(r.ccAddrs ?? []), ...(r.bccAddrs ?? [])]).map(bareAddress);
    deps.contacts
      .touch(userId, emails)
      .catch((err: Error) => log.error({ error: err.message }, '[contacts] could not record recipients as contacts'));
  }

  /**
   * Inserts the rows the plan's caps take and counts their recipients atomically, then queues or schedules
   * them: a send of now with no cap to hold, or within this process's cap lease, through the group writer;
   * else in one transaction with the gate's reservation (for the day the message goes out: now, or its
   * scheduled time). A single send is all or nothing (its refusal is thrown); a batch (`partial`, one recipient a row)
   * keeps the rows that fit, in order, and answers the refusal of the rest.
   */
  async function commit(
    p: Prepared,
    rows: MessageValues[],
    partial: boolean,
    source: AcceptSource = 'api',
  ): Promise<{ kept: MessageValues[]; refusal?: AppError; ssnd: Map<string, string> }> {
    const ssnd = new Map<string, string>();
    if (rows.length === 0) return { kept: rows, ssnd };
    const recipients = rows.reduce((n, r) => n + recipientCount(r), 0);
    const accepted = () => {
      deps.queue.enqueue(
        rows.map((r) => r.id!),
        p.user.id,
      );
      messagesAccepted.inc({ source }, rows.length);
      return { kept: rows, ssnd };
    };
    const capped = deps.usage.capped(p.user.plan);
    if (!p.scheduledAt && !capped) {
      // No cap to hold: the rows and the counters commit in one statement, shared with the other sends ready
      // at the same time (group commit, ./accept-writer.ts); it resolves once they are durable.
      await writer.write({ userId: p.user.id, rows, recipients });
      return accepted();
    }
    // A send of now within this process's lease of the account's caps goes the same way, moving its
    // recipients off the lease in that statement; a lease taken back meanwhile sends it to the reservation below.
    const use =
      !p.scheduledAt && !partial ? leases.take(p.user.id, recipients, deps.usage.capsFor(p.user.plan)) : undefined;
    if (use) {
      try {
        await writer.write({ userId: p.user.id, rows, recipients, lease: use });
        leases.settle(use, 'written');
        return accepted();
      } catch (err) {
        const lost = isLeaseLost(err);
        leases.settle(use, lost ? 'lost' : 'failed');
        if (!lost) throw err;
      }
    }
    let kept = rows;
    let refusal: AppError | undefined;
    let lease: LeaseGrant | undefined;
    const startedAt = leases.now();
    // An account that sends again soon in this process asks for a lease with its reservation.
    const leasing = !p.scheduledAt && !partial && leases.wants(p.user.id);
    const reserved = db.transaction(async (tx) => {
      if (partial) {
        const r = await deps.gate.reserveUpTo(tx, p.user.id, p.user.plan, rows.length, p.scheduledAt);
        [kept, refusal] = [rows.slice(0, r.granted), r.refusal];
      } else {
        if (leasing) {
          const ask = { holder: leases.holder, ttlMs: CAP_LEASE_TTL_MS, max: CAP_LEASE_MAX };
          ({ refusal, lease } = await deps.gate.reserveLeasing(tx, p.user.id, p.user.plan, recipients, ask));
        } else refusal = await deps.gate.reserve(tx, p.user.id, p.user.plan, recipients, p.scheduledAt);
        if (refusal) kept = [];
      }
      if (kept.length) await tx.insert(schema.messages).values(kept);
      if (p.scheduledAt)
        for (const r of kept)
          ssnd.set(
            r.id!,
            await deps.scheduled.insert(tx, { userId: p.user.id, messageId: r.id!, scheduledAt: p.scheduledAt }),
          );
    });
    // The lease counts once its transaction committed (and the asking ends whatever came of it).
    if (leasing)
      await reserved.then(
        () => leases.granted(p.user.id, lease, startedAt),
        (err: unknown) => {
          leases.granted(p.user.id, undefined, startedAt);
          throw err;
        },
      );
    else await reserved;
    if (refusal && !partial) throw refusal;
    if (kept.length) messagesAccepted.inc({ source }, kept.length);
    if (p.scheduledAt)
      await deps.scheduled.startAll(
        [...ssnd].map(([messageId, id]) => ({ id, messageId, userId: p.user.id, scheduledAt: p.scheduledAt! })),
      );
    else if (kept.length)
      deps.queue.enqueue(
        kept.map((r) => r.id!),
        p.user.id,
      );
    return { kept, refusal, ssnd };
  }

  /** Recipients of one message row: what the plan counts. */
  const recipientCount = (r: MessageValues) =>
    (r.toAddrs?.length ?? 0) + (r.ccAddrs?.length ?? 0) + (r.bccAddrs?.length ?? 0);

  /** The early answer from counters already read (the reservation in `commit` is what holds under concurrency). */
  function limitError(room: { daily: number; monthly: number }, need: number): AppError | undefined {
    if (room.monthly < need) return capRefusal('monthly');
    if (room.daily < need) return capRefusal('daily');
    return undefined;
  }

  return {
    /** Gives back this process's leased cap allowance (at shutdown). */
    close: () => leases.close(),

    /** One message; `source` names the edge it came through in the accept metrics (api, or submission). */
    async send(actor: Actor, input: SendInput, source: AcceptSource = 'api') {
      const started = performance.now();
      const enrol = input.sequence
        ? await deps.enrolments.resolve(actor.userId, { ...input, sequence: input.sequence })
        : undefined;
      // A domain-scoped key reaches only the sequences that send from its domain.
      if (enrol) await deps.sequences.inScope(actor, enrol, input.sequence!);
      const to = parseMailboxes(input.to, 'to');
      const cc = parseMailboxes(input.cc, 'cc');
      const bcc = parseMailboxes(input.bcc, 'bcc');
      const p = await prepare(
        actor,
        input,
        [...to, ...cc, ...bcc].map((m) => m.address),
      );
      if (p.suppressed.size)
        throw new AppError(422, 'recipient_suppressed', `Suppressed recipient(s): ${[...p.suppressed].join(', ')}`);
      // The room read with the other gates is of today: a scheduled send is judged at its reservation.
      const over = p.scheduledAt ? undefined : limitError(p.room, to.length + cc.length + bcc.length);
      if (over) throw over;
      const row = {
        ...(await build(p, {
          to,
          cc,
          bcc,
          explicit: input,
          data: input.templateData,
          headers: checkHeaders(input.headers),
          metadata: input.metadata,
        })),
        enrols: Boolean(enrol),
      };
      // Enrolment rows go first, held until each recipient's delivery succeeds; a failed commit discards them.
      const owed = enrol
        ? await deps.enrolments.write(p.user.id, enrol, {
            messageId: row.id!,
            from: row.fromAddr,
            subject: row.subject ?? '',
            to: to.map((m) => m.address),
          })
        : [];
      const { ssnd } = await commit(p, [row], false, source).catch(async (err) => {
        if (owed.length) await deps.enrolments.discard(owed).catch(() => undefined); // else the sweep finds no message and enrolls nobody
        throw err;
      });
      touchContacts(p.user.id, [row]);
      acceptDuration.observe({ source }, since(started));
      log.info(
        {
          messageId: row.id,
          accountId: p.user.id,
          domainId: p.domain.id,
          recipients: to.length + cc.length + bcc.length,
          scheduled: Boolean(p.scheduledAt),
        },
        'message accepted',
      );
      return p.scheduledAt
        ? { id: ssnd.get(row.id!)!, status: 'scheduled' as const, scheduledAt: p.scheduledAt }
        : { id: row.id!, status: 'queued' as const };
    },

    async sendBatch(actor: Actor, input: BatchInput) {
      const started = performance.now();
      const parsed = input.recipients.map((r, i) => {
        try {
          return parseMailbox(r.to, `recipients[${i}].to`);
        } catch (err) {
          return err as AppError;
        }
      });
      const p = await prepare(
        actor,
        input,
        parsed.flatMap((m) => (m instanceof AppError ? [] : [m.address])),
      );
      const shared = checkHeaders(input.headers);
      const blocked = p.suppressed;
      const results: BatchResult[] = [];
      const rows: MessageValues[] = [];
      for (const [i, r] of input.recipients.entries()) {
        try {
          const to = parsed[i]!;
          if (to instanceof AppError) throw to;
          if (blocked.has(to.address)) throw new AppError(422, 'recipient_suppressed', `${to.address} is suppressed`);
          const data = { ...input.templateData, ...r.templateData };
          const row = await build(p, {
            to: [to],
            cc: [],
            bcc: [],
            explicit: input,
            data,
            headers: { ...shared, ...checkHeaders(r.headers, `recipients[${i}].headers`) },
          });
          rows.push(row);
          results.push({ to: r.to, status: p.scheduledAt ? 'scheduled' : 'sent', id: row.id! });
        } catch (err) {
          if (!(err instanceof AppError)) throw err;
          results.push({ to: r.to, status: 'failed', error: err.message, code: err.code });
        }
      }
      // The caps take the first recipients that fit; the rest fail with the cap's code (SPEC.md: `daily_limit`).
      const { kept, refusal, ssnd } = await commit(p, rows, true);
      if (kept.length) touchContacts(p.user.id, kept);
      const dropped = new Set(rows.slice(kept.length).map((r) => r.id!));
      for (const [i, res] of results.entries()) {
        if (res.id && dropped.has(res.id))
          results[i] = { to: res.to, status: 'failed', error: refusal!.message, code: refusal!.code };
        else if (res.status === 'scheduled') res.id = ssnd.get(res.id!)!;
      }
      const count = (s: string) => results.filter((r) => r.status === s).length;
      acceptDuration.observe({ source: 'api' }, since(started));
      log.info(
        { messageIds: kept.map((r) => r.id), accountId: p.user.id, domainId: p.domain.id, failed: count('failed') },
        'batch accepted',
      );
      return { results, sent: count('sent'), scheduled: count('scheduled'), failed: count('failed') };
    },
  };
}
export type SendService = ReturnType<typeof createSendService>;
