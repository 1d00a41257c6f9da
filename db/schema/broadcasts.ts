import { sql } from 'drizzle-orm';
import { boolean, index, integer, jsonb, pgTable, primaryKey, text, uniqueIndex } from 'drizzle-orm/pg-core';
import { ms } from './columns.js';

/**
 * Contacts (`ctc_`): one per (account, address). Created by the API, by CSV import and from mail traffic
 * (an address the account sends to or receives from); `subscribed` false = unsubscribed from broadcasts.
 */
export const contacts = pgTable(
  'contacts',
  {
    id: text('id').primaryKey(),
    userId: text('user_id').notNull(),
    email: text('email').notNull(),
    name: text('name'),
    attributes: jsonb('attributes').$type<Record<string, string | number | boolean | null>>().notNull().default({}),
    subscribed: boolean('subscribed').notNull().default(true),
    unsubscribedAt: ms('unsubscribed_at'),
    createdAt: ms('created_at').notNull(),
    updatedAt: ms('updated_at').notNull(),
    lastSeenAt: ms('last_seen_at'),
  },
  (t) => [
    uniqueIndex('contacts_user_email_uq').on(t.userId, t.email),
    index('contacts_user_created_idx').on(t.userId, t.createdAt),
  ],
);

/** Lists (`lst_`) of contacts, an audience for broadcasts. */
export const lists = pgTable(
  'lists',
  {
    id: text('id').primaryKey(),
    userId: text('user_id').notNull(),
    name: text('name').notNull(),
    createdAt: ms('created_at').notNull(),
    updatedAt: ms('updated_at').notNull(),
  },
  (t) => [index('lists_user_idx').on(t.userId, t.createdAt)],
);

/** Membership of a contact in a list; `added_at` is the paging cursor of the list's contacts. */
export const listMembers = pgTable(
  'list_members',
  {
    listId: text('list_id').notNull(),
    contactId: text('contact_id').notNull(),
    addedAt: ms('added_at').notNull(),
  },
  (t) => [primaryKey({ columns: [t.listId, t.contactId] }), index('list_members_contact_idx').on(t.contactId)],
);

/** CSV imports into a list (`imp_`), run by an import workflow that checkpoints `offset` (rows done). */
export const contactImports = pgTable('contact_imports', {
  id: text('id').primaryKey(),
  userId: text('user_id').notNull(),
  listId: text('list_id').notNull(),
  status: text('status', { enum: ['running', 'done', 'failed'] }).notNull(),
  /** The uploaded CSV of an import staged before `rows_total` existed; imports now stage their rows at upload and keep ''. */
  csv: text('csv').notNull(),
  /** Rows staged in `contact_import_rows` (parsed once, at upload); null for an import not staged yet. */
  rowsTotal: integer('rows_total'),
  offset: integer('offset').notNull().default(0),
  rowsRead: integer('rows_read').notNull().default(0),
  created: integer('created').notNull().default(0),
  updated: integer('updated').notNull().default(0),
  rejected: integer('rejected').notNull().default(0),
  /** The first rejections with their reasons: `{row, reason}` (bounded). */
  rejections: jsonb('rejections').$type<{ row: number; reason: string }[]>().notNull().default([]),
  createdAt: ms('created_at').notNull(),
  updatedAt: ms('updated_at').notNull(),
});

/**
 * The parsed rows of a CSV import not yet applied: staged once when the import is uploaded (`seq` is the
 * 0-based record number), read a chunk at a time by the import workflow and deleted with its checkpoint.
 */
export const contactImportRows = pgTable(
  'contact_import_rows',
  {
    importId: text('import_id').notNull(),
    seq: integer('seq').notNull(),
    email: text('email'),
    name: text('name'),
    attributes: jsonb('attributes').$type<Record<string, string>>(),
    /** Why the row cannot become a contact (`missing email`, …); null for a good row. */
    rejection: text('rejection'),
  },
  (t) => [primaryKey({ columns: [t.importId, t.seq] })],
);

/** Broadcasts (`bct_`), SPEC.md's Broadcast resource. `audience` is the JSON object the clients send. */
export const broadcasts = pgTable(
  'broadcasts',
  {
    id: text('id').primaryKey(),
    userId: text('user_id').notNull(),
    name: text('name').notNull(),
    fromAddr: text('from_addr').notNull(),
    replyTo: text('reply_to'),
    subject: text('subject').notNull().default(''),
    preview: text('preview'),
    audience: jsonb('audience').$type<{ type: 'all' | 'list' | 'filter'; id?: string; query?: string }>().notNull(),
    templateId: text('template_id'),
    html: text('html'),
    text: text('text'),
    footerAddress: text('footer_address'),
    status: text('status', { enum: ['draft', 'scheduled', 'sending', 'sent', 'canceled', 'failed'] }).notNull(),
    scheduledAt: ms('scheduled_at'),
    audienceCount: integer('audience_count'),
    sentCount: integer('sent_count').notNull().default(0),
    failCount: integer('fail_count').notNull().default(0),
    skipCount: integer('skip_count').notNull().default(0),
    sentAt: ms('sent_at'),
    createdAt: ms('created_at').notNull(),
    updatedAt: ms('updated_at').notNull(),
  },
  (t) => [index('broadcasts_user_idx').on(t.userId, t.createdAt)],
);

/**
 * The per-recipient ledger of a broadcast, snapshotted from the audience when sending starts. A row
 * gets its `message_id` in the transaction that inserts its message, so no recipient gets two.
 */
export const broadcastRecipients = pgTable(
  'broadcast_recipients',
  {
    broadcastId: text('broadcast_id').notNull(),
    seq: integer('seq').notNull(),
    contactId: text('contact_id').notNull(),
    email: text('email').notNull(),
    /** `failed`: the send gate refused the recipient (a cap reached, the account or sender no longer allowed to send). */
    status: text('status', { enum: ['pending', 'queued', 'skipped', 'failed'] })
      .notNull()
      .default('pending'),
    messageId: text('message_id'),
    /** Why the entry was skipped (`unsubscribed`, `suppressed`, `contact_deleted`) or failed (the gate's code, e.g. `daily_limit`). */
    skipReason: text('skip_reason'),
  },
  (t) => [
    primaryKey({ columns: [t.broadcastId, t.seq] }),
    uniqueIndex('broadcast_recipients_contact_uq').on(t.broadcastId, t.contactId),
    index('broadcast_recipients_message_idx')
      .on(t.messageId)
      .where(sql`message_id is not null`),
  ],
);
