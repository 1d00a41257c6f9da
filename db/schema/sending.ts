import { boolean, index, integer, jsonb, pgTable, text, uniqueIndex } from 'drizzle-orm/pg-core';
import { bytea, ms } from './columns.js';

/** User templates (`tpl_`). Base templates (`base_`) are built in (core/templates/base.ts), not stored. */
export const templates = pgTable(
  'templates',
  {
    id: text('id').primaryKey(),
    userId: text('user_id').notNull(),
    name: text('name').notNull(),
    subject: text('subject'),
    html: text('html'),
    text: text('text'),
    createdAt: ms('created_at').notNull(),
    updatedAt: ms('updated_at').notNull(),
  },
  (t) => [index('templates_user_idx').on(t.userId, t.createdAt)],
);

/** Stored files: uploads of POST /v1/attachments and inline attachments of sends. Kept in the database so every role sees them. */
export const storedFiles = pgTable(
  'stored_files',
  {
    id: text('id').primaryKey(),
    userId: text('user_id').notNull(),
    filename: text('filename').notNull(),
    contentType: text('content_type').notNull(),
    size: integer('size').notNull(),
    content: bytea('content').notNull(),
    createdAt: ms('created_at').notNull(),
    expiresAt: ms('expires_at').notNull(),
  },
  (t) => [index('stored_files_expires_idx').on(t.expiresAt), index('stored_files_user_idx').on(t.userId, t.expiresAt)],
);

/** Addresses an account may not send to: hard bounces, complaints, manual entries. */
export const suppressions = pgTable(
  'suppressions',
  {
    id: text('id').primaryKey(),
    userId: text('user_id').notNull(),
    email: text('email').notNull(),
    reason: text('reason').notNull(),
    messageId: text('message_id'),
    detail: text('detail'),
    createdAt: ms('created_at').notNull(),
  },
  (t) => [uniqueIndex('suppressions_user_email_uq').on(t.userId, t.email)],
);

/** The delivery timeline (`evt_`): what the service did with a message (sent, bounced, opened, clicked, …). */
export const events = pgTable(
  'events',
  {
    id: text('id').primaryKey(),
    userId: text('user_id').notNull(),
    messageId: text('message_id'),
    domainId: text('domain_id'),
    type: text('type').notNull(),
    recipient: text('recipient'),
    data: jsonb('data').$type<Record<string, unknown>>(),
    /** Engagement webhook dispatch: null (not routed), `pending`, `sending` (claimed), `done`, `failed`. */
    webhookState: text('webhook_state'),
    /** When a dispatcher claimed the event (`sending`); a stale claim is taken over. */
    claimedAt: ms('claimed_at'),
    createdAt: ms('created_at').notNull(),
  },
  (t) => [
    index('events_webhook_state_idx').on(t.webhookState, t.domainId),
    index('events_user_created_idx').on(t.userId, t.createdAt),
    index('events_message_idx').on(t.messageId),
  ],
);

/** Scheduled sends (`ssnd_`): one parked message each, owned by a scheduled-send workflow until it fires. */
export const scheduledSends = pgTable(
  'scheduled_sends',
  {
    id: text('id').primaryKey(),
    userId: text('user_id').notNull(),
    messageId: text('message_id').notNull(),
    scheduledAt: ms('scheduled_at').notNull(),
    status: text('status', { enum: ['scheduled', 'sending', 'sent', 'canceled', 'failed'] }).notNull(),
    /** Set once its workflow was started; the sweep starts those a crash left unstarted. */
    started: boolean('started').notNull().default(false),
    createdAt: ms('created_at').notNull(),
    updatedAt: ms('updated_at').notNull(),
  },
  (t) => [index('scheduled_sends_user_idx').on(t.userId, t.scheduledAt)],
);

/** Per-account counters of the plan limits (`d:YYYY-MM-DD` outbound per day, `m:YYYY-MM` all mail per month), bumped in the accepting transaction. */
export const usageCounters = pgTable(
  'usage_counters',
  {
    userId: text('user_id').notNull(),
    period: text('period').notNull(),
    count: integer('count').notNull().default(0),
  },
  (t) => [uniqueIndex('usage_counters_uq').on(t.userId, t.period)],
);

/**
 * Cap allowance an API process has leased for an account's day and month (core/gate/cap-lease.ts): counted
 * against the caps by every reservation but not usage; each send taken from it moves its recipients from
 * `amount` to the usage counters in the statement that writes the message. Returned when idle, taken back by
 * a reservation that needs it, and ignored (then deleted) once `expires_at` passes, so a crashed process's
 * allowance comes back.
 */
export const capLeases = pgTable(
  'cap_leases',
  {
    id: text('id').primaryKey(),
    userId: text('user_id').notNull(),
    /** The periods it counts against (`d:YYYY-MM-DD`, `m:YYYY-MM`), as in usage_counters. */
    day: text('day').notNull(),
    month: text('month').notNull(),
    holder: text('holder').notNull(),
    /** Recipients still unused. */
    amount: integer('amount').notNull(),
    expiresAt: ms('expires_at').notNull(),
  },
  (t) => [index('cap_leases_user_idx').on(t.userId)],
);
