import type { BounceClass } from './bounce-classes.js';
import { boolean, index, integer, jsonb, pgTable, text, uniqueIndex } from 'drizzle-orm/pg-core';
import { ms } from './columns.js';

/** Per-recipient outcome of an outbound message (core/mail/recipients.ts). */
type RecipientState = {
  status: 'pending' | 'sent' | 'deferred' | 'bounced';
  attempts: number;
  response?: string;
  at?: number;
  bounceClass?: BounceClass;
};
/** One SMTP transaction of a message: the run, the recipients, the answer. */
type TrailEntry = {
  at: number;
  workflowId: string;
  to: string[];
  status: 'sent' | 'deferred' | 'bounced' | 'mixed' | 'throttled';
  response: string;
  /** The egress source it left from; what the transport policy noted (core/mail/recipients.ts). */
  source?: string;
  tls?: string;
};

/**
 * Messages (`msg_`), outbound and inbound. Outbound rows are written `queued` by the send path and
 * moved on by the outbound delivery workflow; `workflow_id` names the run that delivered each one.
 */
export const messages = pgTable(
  'messages',
  {
    id: text('id').primaryKey(),
    userId: text('user_id'),
    direction: text('direction', { enum: ['outbound', 'inbound'] }).notNull(),
    kind: text('kind', { enum: ['user', 'system'] }).notNull(),
    domainId: text('domain_id'),
    fromAddr: text('from_addr').notNull(),
    toAddrs: jsonb('to_addrs').$type<string[]>().notNull(),
    ccAddrs: jsonb('cc_addrs').$type<string[]>(),
    bccAddrs: jsonb('bcc_addrs').$type<string[]>(),
    replyTo: text('reply_to'),
    subject: text('subject'),
    html: text('html'),
    text: text('text'),
    headers: jsonb('headers').$type<Record<string, string>>(),
    metadata: jsonb('metadata').$type<Record<string, string | number | boolean | null>>(),
    status: text('status').notNull(),
    workflowId: text('workflow_id'),
    attempts: integer('attempts').notNull().default(0),
    lastError: text('last_error'),
    smtpMessageId: text('smtp_message_id'),
    createdAt: ms('created_at').notNull(),
    updatedAt: ms('updated_at').notNull(),
    sentAt: ms('sent_at'),
    inReplyTo: text('in_reply_to'),
    trackOpens: integer('track_opens').notNull().default(0),
    trackClicks: integer('track_clicks').notNull().default(0),
    /** Attachment specs resolved at send time: `{filename, contentType, url}` or `{filename, contentType, fileId}`. */
    attachments:
      jsonb('attachments').$type<
        { filename: string; contentType: string; url?: string; fileId?: string; cid?: string }[]
      >(),
    scheduledSendId: text('scheduled_send_id'),
    bounceType: text('bounce_type'),
    nextAttemptAt: ms('next_attempt_at'),
    /** Inbound: conversation root (first References id, else In-Reply-To, else its own Message-ID). */
    threadId: text('thread_id'),
    /** Inbound: {spf, dkim, dmarc, spam} verdicts. Outbound: {key} when a domain-scoped key sent it (judged again as it leaves; not served). */
    auth: jsonb('auth').$type<Record<string, string | null>>(),
    envelopeFrom: text('envelope_from'),
    receivedAt: ms('received_at'),
    sizeBytes: integer('size_bytes'),
    /** Outbound: each recipient's outcome, written the moment its server answered; null until the first attempt. */
    recipients: jsonb('recipients').$type<Record<string, RecipientState>>(),
    /** Outbound: every SMTP transaction (run, recipients, answer), oldest first. */
    trail: jsonb('trail').$type<TrailEntry[]>(),
    /** Outbound: the send named a sequence; its recipients are enrolled as each one's delivery succeeds. */
    enrols: boolean('enrols').notNull().default(false),
    /**
     * Inbound: rspamd's verdict (docs/inbound-policy.md): `{scored, score, required, action, symbols[], reason}`;
     * `scored: false` with the reason when rspamd did not answer in time. A webhook's `spam` reply sets `marked`.
     */
    spam: jsonb('spam').$type<Record<string, unknown>>(),
    /** Inbound, held (quarantine): why, and until when it is kept before the sweep deletes it. */
    heldReason: text('held_reason'),
    heldUntil: ms('held_until'),
    /** Inbound: when a held message was released (delivered as if it had just arrived, once). */
    releasedAt: ms('released_at'),
  },
  (t) => [
    index('messages_user_created_idx').on(t.userId, t.createdAt),
    index('messages_status_idx').on(t.status, t.createdAt),
    index('messages_thread_idx').on(t.userId, t.threadId),
  ],
);

/** The local outbox of OUTBOUND_MODE=capture: the exact bytes that would have gone out. */
export const outbox = pgTable(
  'outbox',
  {
    id: text('id').primaryKey(),
    messageId: text('message_id').notNull(),
    envelopeFrom: text('envelope_from').notNull(),
    envelopeTo: jsonb('envelope_to').$type<string[]>().notNull(),
    subject: text('subject'),
    raw: text('raw').notNull(),
    createdAt: ms('created_at').notNull(),
  },
  (t) => [uniqueIndex('outbox_message_uq').on(t.messageId), index('outbox_created_idx').on(t.createdAt)],
);
