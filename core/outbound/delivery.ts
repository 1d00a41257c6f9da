import { and, asc, eq, getTableColumns, inArray, isNotNull, isNull, lt, or } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import type { AttachmentService } from '../attachments/service.js';
import { parsePrivateKey, signDkim, SIGNING_KEY_CACHE_MS, type DkimKey } from '../transport/dkim.js';
import { renderMessage } from '../transport/render.js';
import { feedbackIdOf, streamOf } from '../mail/feedback-id.js';
import { isResentForward } from '../mail/headers.js';
import { isThrottled, type OutboundTransport, type SendContext } from '../transport/transport.js';
import { isBulk } from '../mail/bulk.js';
import type { EgressRouter } from '../egress/router.js';
import type { Sealer } from '../secrets.js';
import type { ServiceSigner } from '../domains/service-domain.js';
import { AppError } from '../errors.js';
import { log } from '../log.js';
import { countBounce } from '../metrics.js';
import { idle, type Progress } from '../mail/progress.js';
import { BOUNCE_LABEL } from '../domains/records.js';
import type { SentMessage } from '../mailboxes/service.js';
import { classifyBounce, defaultBounceRules, suppresses, type BounceRules } from '../mail/bounce-class.js';
import type { EventService } from '../message-events.js';
import type { SuppressionService } from '../gate/suppressions.js';
import type { WarmupService } from '../shaping/warmup.js';
import { createOutcomeWriter, type Outcome } from './outcome-writer.js';
import { createReadCache } from '../shaping/read-cache.js';
import { failedEvent, judgeClaimed, standingColumn } from '../gate/departure.js';
import { refusalNote } from '../gate/gate.js';
import {
  applyResults,
  messageStatus,
  owed,
  recipientsOf,
  type MessageStatus,
  type RecipientResult,
  type RecipientStates,
  type TrailEntry,
} from '../mail/recipients.js';

type MessageRow = typeof schema.messages.$inferSelect;
/** Messages in flight at once in one batch: each waits mostly on its SMTP round trip; the transport pools connections. */
export const DELIVERY_CONCURRENCY = 20;
/**
 * `throttled`: messages whose site could not take them yet (shaping), each with how long to wait before the next try;
 * `failed`: messages the send gate refused as they left (ended `failed`, nothing sent).
 */
export type DeliveryResult = {
  sent: number;
  bounced: number;
  skipped: number;
  deferred: string[];
  throttled: { id: string; waitMs: number }[];
  failed?: number;
};
/** A message none of whose owed recipients' sites could take it now: try again after `waitMs` (not an attempt of the ladder). */
export type Throttle = { waitMs: number; site?: string; spacingMs?: number };
/** `ladder`: an attempt of the deferred ladder (a throttled message stays `deferred`); else a first delivery (it goes back to `queued`). */
type Attempt = {
  workflowId: string;
  final: boolean;
  nextAttemptAt: number | null;
  progress: Progress;
  ladder?: boolean;
};

/**
 * Outbound delivery: renders MIME, DKIM-signs with the domain's key, hands the bytes to the provider
 * one SMTP transaction per recipient domain, and records each transaction's per-recipient outcome on
 * the message row the moment the server has answered (DESIGN.md, Delivery semantics): a retry owes
 * only the recipients with no final outcome, so nothing recorded is ever sent again.
 */
export function createDeliveryService(deps: {
  db: Db;
  transport: OutboundTransport;
  sealer: Sealer;
  serviceDomain: string;
  attachments: AttachmentService;
  events: EventService;
  suppressions: SuppressionService;
  /** Files what went out into the sender's Sent mailbox (issue 12). */
  fileSent?: (m: SentMessage) => Promise<void>;
  /** Signs domainless system mail (verification, sign-in links) with the service domain's key. */
  serviceSigner?: () => Promise<ServiceSigner>;
  /** A send that named a sequence: enrolls the recipients it reached, drops those it bounced (SPEC.md, "when the send succeeds"). */
  settleEnrolments?: (messageId: string, outcome: { sent: string[]; failed: string[] }) => Promise<void>;
  /** Bounce classification rules (BOUNCE_RULES_FILE on top of the shipped bounce-rules.toml). */
  bounceRules?: BounceRules;
  /** A warming sending domain's daily volume per site (docs/deliverability.md, Warm-up). */
  warmup?: WarmupService;
  /** The egress pool each message leaves from (docs/egress.md); without it, its stream's default pool. */
  egress?: EgressRouter;
}) {
  const { db } = deps;
  const rules = deps.bounceRules ?? defaultBounceRules();
  /**
   * Classifies every refused or deferred answer before a final attempt turns a deferral into a bounce, so a
   * 4xx that ran out of retries keeps its temporary class; `suppress` says whether its address is suppressed.
   */
  const classify = (r: RecipientResult): RecipientResult & { suppress?: boolean } => {
    if (r.status === 'sent') return r;
    // The transport's own verdict (no verified TLS where required) is kept, through the final attempt too.
    if (r.bounceClass === 'tls_required') return { ...r, suppress: false };
    const c = classifyBounce(rules, { text: r.response, permanent: r.status === 'bounced' });
    return { ...r, bounceClass: c.bounceClass, suppress: r.status === 'bounced' && suppresses(c) };
  };
  const m = schema.messages;

  // Sending domains by id (signing key parsed once, TLS requirement, pinned pool), briefly cached: a batch
  // sends many messages of one domain. Lanes that find the entry stale at once share one read, and a read
  // that finds the same sealed key keeps the key already parsed (parsing costs about a signature).
  type DomainInfo = { key: DkimKey; tlsRequired: boolean; pinnedPool: string | null };
  const domains = createReadCache<string, { info: DomainInfo | undefined; sealed?: string }>({
    ttlMs: SIGNING_KEY_CACHE_MS,
    load: async (id, previous) => {
      const d = schema.domains;
      const [row] = await db
        .select({
          domain: d.domain,
          selector: d.dkimSelector,
          sealed: d.dkimPrivateKeySealed,
          tls: d.tls,
          egressPinned: d.egressPinned,
          emailProviderId: d.emailProviderId,
        })
        .from(d)
        .where(eq(d.id, id));
      if (!row) return { info: undefined };
      const parsed = previous?.info && previous.sealed === row.sealed ? previous.info.key.privateKey : undefined;
      return {
        sealed: row.sealed,
        info: {
          key: {
            domain: row.domain,
            selector: row.selector,
            privateKey: parsed ?? parsePrivateKey(deps.sealer.open(row.sealed)),
          },
          tlsRequired: row.tls === 'enforced',
          pinnedPool: row.egressPinned ? row.emailProviderId : null,
        },
      };
    },
  });
  const domainInfo = async (id: string): Promise<DomainInfo | undefined> => (await domains.get(id)).info;
  const domainKey = async (id: string) => (await domainInfo(id))?.key;

  /** What the transport needs to know of a message: its stream, its pool, its domain's TLS requirement, whose it is. */
  async function contextOf(row: MessageRow): Promise<SendContext> {
    const stream = isBulk(row) ? 'bulk' : 'transactional';
    const d = row.domainId && row.kind === 'user' ? await domainInfo(row.domainId) : undefined;
    const pool = await deps.egress?.poolFor({ userId: row.userId, stream, domainPool: d?.pinnedPool });
    return {
      stream,
      ...(pool ? { pool } : {}),
      tlsRequired: d?.tlsRequired ?? false,
      owner: { userId: row.userId, domainId: row.domainId },
    };
  }
  // The service domain's key (system mail), parsed once per PEM.
  let service: { pem: string; key: DkimKey } | undefined;
  async function serviceKey(): Promise<DkimKey | undefined> {
    const s: ServiceSigner | undefined = await deps.serviceSigner?.();
    if (!s) return undefined;
    if (service?.pem !== s.privateKey || service.key.domain !== s.domain || service.key.selector !== s.selector) {
      service = {
        pem: s.privateKey,
        key: { domain: s.domain, selector: s.selector, privateKey: parsePrivateKey(s.privateKey) },
      };
    }
    return service.key;
  }

  /** Signs with the message's domain key, or the service domain's for system mail. */
  async function sign(row: MessageRow, raw: Buffer): Promise<Buffer> {
    const key = row.domainId ? await domainKey(row.domainId) : row.kind === 'system' ? await serviceKey() : undefined;
    return key ? signDkim(raw, key) : raw;
  }

  // A message's Feedback-ID depends only on its domain, account and stream (and this deployment's sender id,
  // a hash): worked out once per combination, not per message.
  const feedbackIds = new Map<string, string>();
  function feedbackIdFor(row: MessageRow): string {
    const k = `${row.kind}|${row.domainId ?? ''}|${row.userId ?? ''}|${streamOf(row)}`;
    let id = feedbackIds.get(k);
    if (id === undefined) {
      if (feedbackIds.size > 10_000) feedbackIds.clear();
      feedbackIds.set(k, (id = feedbackIdOf(row, deps.serviceDomain)));
    }
    return id;
  }

  /** The signed bytes and envelope sender of a message (the same bytes for every transaction of it). */
  async function build(row: MessageRow): Promise<{ raw: Buffer; from: string; smtpMessageId: string }> {
    const attachments = await Promise.all(
      (row.attachments ?? []).map((a) => deps.attachments.loadForSend(row.userId ?? '', a)),
    );
    // System mail returns to the service domain, so its bounces are processed like customers' (VERP id in the local part).
    const domain =
      row.kind === 'system' ? deps.serviceDomain : recipientsOf({ toAddrs: [row.fromAddr] })[0]?.split('@')[1];
    // A forward sent as the original message: its bytes as prepared, its SRS envelope sender (core/mailboxes/forward.ts).
    if (isResentForward(row.headers) && attachments[0]) {
      return {
        raw: await sign(row, attachments[0].content),
        from: row.envelopeFrom || (domain ? `bounce+${row.id}@${BOUNCE_LABEL}.${domain}` : ''),
        smtpMessageId: `<${row.id}@${deps.serviceDomain}>`,
      };
    }
    const rendered = await renderMessage({
      ...row,
      attachments,
      serviceDomain: deps.serviceDomain,
      feedbackId: feedbackIdFor(row),
      envelopeFrom: domain ? `bounce+${row.id}@${BOUNCE_LABEL}.${domain}` : undefined,
    });
    return { raw: await sign(row, rendered.raw), from: rendered.envelope.from, smtpMessageId: rendered.messageId };
  }

  /** Writes one transaction's outcome (and, on the last one, the message status and its events): durable on return. */
  const writer = createOutcomeWriter({ db, events: deps.events });
  function record(
    row: MessageRow,
    changed: RecipientStates,
    entry: TrailEntry,
    final?: {
      status: MessageStatus | 'queued' | 'failed';
      attempt: Attempt;
      smtpMessageId: string;
      sentAny: boolean;
      events: Outcome['events'];
    },
  ) {
    return writer.write({
      id: row.id,
      changed,
      entry,
      events: final?.events ?? [],
      final: final && {
        status: final.status,
        nextAttemptAt: final.status === 'deferred' || final.status === 'queued' ? final.attempt.nextAttemptAt : null,
        lastError: entry.status === 'sent' ? null : entry.response,
        smtpMessageId: final.smtpMessageId || null,
        sentAny: final.sentAny,
      },
    });
  }

  /** One attempt at one claimed message: every owed recipient, one transaction per group, each recorded at once. */
  async function deliver(row: MessageRow, attempt: Attempt): Promise<MessageStatus | Throttle> {
    const all = recipientsOf(row);
    const states: RecipientStates = { ...(row.recipients ?? {}) };
    const todo = owed(all, states);
    let built: Awaited<ReturnType<typeof build>> | undefined;
    let buildError: RecipientResult['status'] | undefined;
    let why = '';
    try {
      built = await build(row);
    } catch (err) {
      // A failure to build (an attachment fetch, say) is temporary when retrying can help.
      buildError = err instanceof AppError && err.retryable ? 'deferred' : 'bounced';
      why = `could not build the message: ${(err as Error).message}`;
    }
    const groups = built ? deps.transport.group(todo) : [todo];
    const warmup = built && row.domainId && row.kind === 'user' ? await deps.warmup?.gateFor(row.domainId) : undefined;
    const ctx: SendContext | undefined = built ? { ...(await contextOf(row)), warmup } : undefined;
    const sent: string[] = [];
    const bounced: (RecipientResult & { suppress?: boolean })[] = [];
    let status: MessageStatus = messageStatus(all, states);
    const throttled: { to: string[]; waitMs: number; cause: string; site?: string; spacingMs?: number }[] = [];
    for (const [i, group] of groups.entries()) {
      const out = built
        ? await deps.transport.send(row.id, { from: built.from, to: group }, built.raw, row.subject, ctx)
        : group.map((address) => ({ address, status: buildError!, response: why }));
      if (isThrottled(out)) {
        // Its site cannot take it yet (shaping): nothing was sent, its recipients stay owed.
        throttled.push({ to: group, waitMs: out.waitMs, cause: out.cause, site: out.site, spacingMs: out.spacingMs });
        attempt.progress.beat();
        continue;
      }
      let results = out.map(classify);
      if (attempt.final)
        results = results.map((r) => (r.status === 'deferred' ? { ...r, status: 'bounced' as const } : r));
      const { changed, entry } = applyResults(states, results, attempt.workflowId);
      log.info(
        {
          messageId: row.id,
          accountId: row.userId,
          domainId: row.domainId,
          to: group.length,
          result: entry.status,
          response: entry.response.slice(0, 200),
        },
        'smtp transaction',
      );
      sent.push(...results.filter((r) => r.status === 'sent').map((r) => r.address));
      bounced.push(...results.filter((r) => r.status === 'bounced'));
      const last = i === groups.length - 1 && throttled.length === 0;
      status = messageStatus(all, states);
      await record(
        row,
        changed,
        entry,
        last
          ? {
              status,
              attempt,
              smtpMessageId: built?.smtpMessageId ?? '',
              sentAny: sent.length > 0,
              events: eventsOf(row, sent, bounced, status, entry.response),
            }
          : undefined,
      );
      attempt.progress.beat();
    }
    const waiting = throttled.length
      ? await recordThrottled(row, states, throttled, attempt, {
          smtpMessageId: built?.smtpMessageId ?? '',
          sent,
          bounced,
        })
      : undefined;
    if (groups.length === 0)
      await record(
        row,
        {},
        {
          at: Date.now(),
          workflowId: attempt.workflowId,
          to: [],
          status: status === 'deferred' ? 'deferred' : status,
          response: 'nothing owed',
        },
        { status, attempt, smtpMessageId: row.smtpMessageId ?? '', sentAny: false, events: [] },
      );
    // Only a permanent recipient-level failure (invalid_recipient, bad_domain) suppresses; spam, policy or reputation blocks never do.
    for (const b of bounced) countBounce('sync', b.bounceClass);
    for (const b of bounced)
      if (b.suppress && row.userId && row.kind === 'user')
        await deps.suppressions.add(row.userId, b.address, 'hard_bounce', { messageId: row.id, detail: b.response });
    if (row.enrols && (sent.length || bounced.length))
      await deps.settleEnrolments?.(row.id, { sent, failed: bounced.map((b) => b.address) });
    // A copy in the sender's Sent mailbox once anyone got it (idempotent per message).
    if (built && sent.length)
      await deps.fileSent?.({
        userId: row.userId,
        domainId: row.domainId,
        from: row.fromAddr,
        raw: built.raw,
        messageId: row.id,
        subject: row.subject,
        kind: row.kind,
        headers: row.headers,
      });
    return waiting ?? status;
  }

  /**
   * The final write of an attempt some of whose transactions were throttled: a trail entry saying what
   * it waits for, and the status: still `deferred` when a real answer deferred someone (the ladder goes
   * on) or this is a ladder attempt, else back to `queued` until its site can take it. Answers the wait
   * when no real answer deferred anyone.
   */
  async function recordThrottled(
    row: MessageRow,
    states: RecipientStates,
    throttled: { to: string[]; waitMs: number; cause: string; site?: string; spacingMs?: number }[],
    attempt: Attempt,
    done: { smtpMessageId: string; sent: string[]; bounced: RecipientResult[] },
  ): Promise<Throttle | undefined> {
    const first = throttled.reduce((a, b) => (b.waitMs < a.waitMs ? b : a));
    const waitMs = first.waitMs;
    const waitingFor = new Set(throttled.flatMap((t) => t.to));
    const deferredByAnswer = owed(recipientsOf(row), states).some((a) => !waitingFor.has(a));
    const status = deferredByAnswer || attempt.ladder ? 'deferred' : 'queued';
    const response = `waiting ${Math.ceil(waitMs / 1000)} s for the recipients' site: ${throttled[0]!.cause}`.slice(
      0,
      500,
    );
    const entry: TrailEntry = {
      at: Date.now(),
      workflowId: attempt.workflowId,
      to: [...waitingFor],
      status: 'throttled',
      response,
    };
    await record(row, {}, entry, {
      status,
      attempt: deferredByAnswer ? attempt : { ...attempt, nextAttemptAt: Date.now() + waitMs },
      smtpMessageId: done.smtpMessageId,
      sentAny: done.sent.length > 0,
      events: eventsOf(row, done.sent, done.bounced, deferredByAnswer ? 'deferred' : status, response),
    });
    return deferredByAnswer ? undefined : { waitMs, site: first.site, spacingMs: first.spacingMs };
  }

  /** The timeline events of one attempt: sent (who got it), one bounce per refused address, deferred. */
  function eventsOf(
    row: MessageRow,
    sent: string[],
    bounced: RecipientResult[],
    status: MessageStatus | 'queued',
    response: string,
  ) {
    if (!row.userId || row.kind !== 'user') return [];
    const base = { userId: row.userId, messageId: row.id, domainId: row.domainId };
    return [
      ...(sent.length ? [{ ...base, type: 'email.sent' as const, data: { to: sent, response } }] : []),
      ...bounced.map((b) => ({
        ...base,
        type: 'email.bounced' as const,
        recipient: b.address,
        data: { bounce: { type: 'hard', diagnostic: b.response, bounceClass: b.bounceClass ?? 'other' } },
      })),
      ...(status === 'deferred' ? [{ ...base, type: 'email.deferred' as const, data: { error: response } }] : []),
    ];
  }

  /**
   * Ends a row the send gate refused as it was about to leave (core/gate/departure.ts), through the same
   * write as every outcome: `failed`, `last_error` and a `refused` trail entry saying why, and its
   * `email.failed` event (webhooks as engagement events); nothing is built or sent. A send that named a
   * sequence enrols none of its recipients.
   */
  async function refuse(row: MessageRow, refusal: AppError, attempt: Attempt): Promise<void> {
    const entry: TrailEntry = {
      at: Date.now(),
      workflowId: attempt.workflowId,
      to: owed(recipientsOf(row), row.recipients),
      status: 'refused',
      response: refusalNote(refusal),
    };
    const events = row.userId ? [failedEvent(row, refusal)] : [];
    await record(row, {}, entry, {
      status: 'failed',
      attempt: { ...attempt, nextAttemptAt: null },
      smtpMessageId: row.smtpMessageId ?? '',
      sentAny: false,
      events,
    });
    log.info(
      { messageId: row.id, accountId: row.userId, domainId: row.domainId, code: refusal.code },
      'refused at departure',
    );
    if (row.enrols)
      await deps.settleEnrolments?.(row.id, { sent: [], failed: owed(recipientsOf(row), row.recipients) });
  }

  /**
   * Holds a bulk copy whose sender domain's bulk mail the complaint guard paused (core/gate/departure.ts):
   * nothing is sent; a `throttled` trail entry says why, and it waits like a throttled message (`queued`, or
   * still `deferred` on the ladder) to be looked at again after `waitMs`.
   */
  async function holdBulk(row: MessageRow, waitMs: number, attempt: Attempt): Promise<Throttle> {
    const entry: TrailEntry = {
      at: Date.now(),
      workflowId: attempt.workflowId,
      to: owed(recipientsOf(row), row.recipients),
      status: 'throttled',
      response: `held ${Math.ceil(waitMs / 1000)} s: the sender domain's bulk mail is paused (complaint guard)`,
    };
    await record(row, {}, entry, {
      status: attempt.ladder ? 'deferred' : 'queued',
      attempt: { ...attempt, nextAttemptAt: Date.now() + waitMs },
      smtpMessageId: row.smtpMessageId ?? '',
      sentAny: false,
      events: [],
    });
    return { waitMs };
  }

  /** Runs `work` over `items` with at most `lanes` at once: a stalled item holds one lane, not a whole chunk. */
  async function inLanes<T>(items: T[], lanes: number, progress: Progress, work: (item: T) => Promise<void>) {
    let next = 0;
    await Promise.all(
      Array.from({ length: Math.min(lanes, items.length) }, async () => {
        while (next < items.length && !progress.stopped()) await work(items[next++]!);
      }),
    );
  }

  return {
    /**
     * Claims the batch's queued rows for `workflowId` and delivers them; a retry of the same run takes
     * its own rows still `sending` (those cut off mid-transaction) and skips every recorded outcome. Answers
     * the rows of this run left deferred, including those an earlier attempt deferred.
     */
    async sendQueued(
      input: { messageIds: string[]; workflowId: string; nextAttemptAt?: number | null },
      progress: Progress = idle,
    ): Promise<DeliveryResult> {
      // The claim also reads each sender's standing: the gate judges the batch again with no extra round trip.
      const {
        rows: claimed,
        refused,
        held,
      } = judgeClaimed(
        await db
          .update(m)
          .set({ status: 'sending', workflowId: input.workflowId, updatedAt: Date.now() })
          .where(
            and(
              inArray(m.id, input.messageIds),
              or(eq(m.status, 'queued'), and(eq(m.status, 'sending'), eq(m.workflowId, input.workflowId))),
            ),
          )
          .returning({ ...getTableColumns(m), standing: standingColumn() }),
      );
      const result: DeliveryResult = {
        sent: 0,
        bounced: 0,
        skipped: input.messageIds.length - claimed.length,
        deferred: [],
        throttled: [],
      };
      const attempt: Attempt = {
        workflowId: input.workflowId,
        final: false,
        nextAttemptAt: input.nextAttemptAt ?? null,
        progress,
      };
      const throttledBySite: ({ id: string } & Throttle)[] = [];
      const deferredHere: string[] = [];
      await inLanes(claimed, DELIVERY_CONCURRENCY, progress, async (row) => {
        const refusal = refused.get(row.id);
        if (refusal) {
          await refuse(row, refusal, attempt);
          result.failed = (result.failed ?? 0) + 1;
          return;
        }
        const hold = held.get(row.id);
        if (hold !== undefined)
          return void throttledBySite.push({ id: row.id, ...(await holdBulk(row, hold, attempt)) });
        const r = await deliver(row, attempt);
        if (typeof r === 'object') throttledBySite.push({ id: row.id, ...r });
        else if (r === 'deferred') deferredHere.push(row.id);
        else result[r] += 1;
      });
      result.throttled = spread(throttledBySite);
      // Every row of this run waiting on a retry, also those an earlier (failed) attempt deferred: the workflow
      // starts their ladders. When this attempt claimed every row of the batch, no earlier attempt left one
      // deferred (a deferred row is not claimed again), so the rows it recorded `deferred` are all of them.
      if (claimed.length === input.messageIds.length && !progress.stopped()) {
        result.deferred = deferredHere;
        return result;
      }
      const deferred = await db
        .select({ id: m.id })
        .from(m)
        .where(and(inArray(m.id, input.messageIds), eq(m.workflowId, input.workflowId), eq(m.status, 'deferred')));
      result.deferred = deferred.map((r) => r.id);
      return result;
    },

    /** Ids of outbound rows still `queued` and unclaimed after `olderThanMs`: their batch never started. */
    async findStranded(olderThanMs: number, limit: number): Promise<string[]> {
      const rows = await db
        .select({ id: m.id })
        .from(m)
        .where(
          and(
            eq(m.status, 'queued'),
            eq(m.direction, 'outbound'),
            isNull(m.workflowId),
            lt(m.createdAt, Date.now() - olderThanMs),
          ),
        )
        .orderBy(asc(m.createdAt))
        .limit(limit);
      return rows.map((r) => r.id);
    },

    /**
     * Rows no workflow will move: deferred far past their next attempt, or `sending` long after any
     * attempt could still run (their run was terminated). The sweep restarts their deferred ladders.
     */
    async findAbandoned(opts: { deferredGraceMs: number; sendingGraceMs: number; limit: number }): Promise<string[]> {
      const now = Date.now();
      const rows = await db
        .select({ id: m.id })
        .from(m)
        .where(
          and(
            eq(m.direction, 'outbound'),
            or(
              and(eq(m.status, 'deferred'), lt(m.nextAttemptAt, now - opts.deferredGraceMs)),
              and(eq(m.status, 'deferred'), isNull(m.nextAttemptAt), lt(m.updatedAt, now - opts.deferredGraceMs)),
              and(eq(m.status, 'sending'), lt(m.updatedAt, now - opts.sendingGraceMs)),
              // Waiting for its site in a batch run that is gone (throttled rows keep the id of their run).
              and(eq(m.status, 'queued'), isNotNull(m.workflowId), lt(m.nextAttemptAt, now - opts.deferredGraceMs)),
            ),
          ),
        )
        .orderBy(asc(m.updatedAt))
        .limit(opts.limit);
      return rows.map((r) => r.id);
    },

    /**
     * A later attempt at a deferred message (its owed recipients only); `final` turns a temporary failure
     * into a bounce. A Throttle answer means its site could not take it: the ladder waits and tries again.
     */
    async retryDeferred(
      input: { messageId: string; workflowId: string; final: boolean; nextAttemptAt: number | null },
      progress: Progress = idle,
    ): Promise<MessageStatus | 'skipped' | 'failed' | Throttle> {
      // A deferred message may wait days: the gate judges it again before every attempt (the ladder ends on a refusal).
      const {
        rows: [row],
        refused,
        held,
      } = judgeClaimed(
        await db
          .update(m)
          .set({ status: 'sending', updatedAt: Date.now() })
          .where(and(eq(m.id, input.messageId), inArray(m.status, ['deferred', 'sending', 'queued'])))
          .returning({ ...getTableColumns(m), standing: standingColumn() }),
      );
      if (!row) return 'skipped';
      const refusal = refused.get(row.id);
      if (refusal) {
        await refuse(row, refusal, {
          workflowId: input.workflowId,
          final: input.final,
          nextAttemptAt: null,
          progress,
          ladder: true,
        });
        return 'failed';
      }
      const hold = held.get(row.id);
      const ladder = { workflowId: input.workflowId, final: input.final, nextAttemptAt: input.nextAttemptAt, progress };
      if (hold !== undefined) return holdBulk(row, hold, { ...ladder, ladder: true });
      return deliver(row, {
        workflowId: input.workflowId,
        final: input.final,
        nextAttemptAt: input.nextAttemptAt,
        progress,
        ladder: true,
      });
    },
  };
}
export type DeliveryService = ReturnType<typeof createDeliveryService>;

/**
 * The waits of a batch's throttled messages: those held back by a site's message rate are spaced one
 * rate interval apart (the k-th waits k intervals more), so the run's next tries find a token each
 * instead of all retrying at the first token.
 */
export function spread(items: ({ id: string } & Throttle)[]): { id: string; waitMs: number }[] {
  const seen = new Map<string, number>();
  return items.map((t) => {
    if (!t.site || !t.spacingMs) return { id: t.id, waitMs: t.waitMs };
    const k = seen.get(t.site) ?? 0;
    seen.set(t.site, k + 1);
    return { id: t.id, waitMs: Math.ceil(t.waitMs + k * t.spacingMs) };
  });
}
