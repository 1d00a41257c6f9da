import { boolean, index, integer, jsonb, pgTable, serial, text, uniqueIndex } from 'drizzle-orm/pg-core';
import { bytea, ms } from './columns.js';

/**
 * App passwords (`apw_`): mailbox credentials scoped to one domain and a local-part pattern, for IMAP
 * and/or the mailbox API. Only a SHA-256 of the secret is kept. Legacy rows (`svc_imap_`) have no
 * domain and cover the whole account, for IMAP only.
 */
export const appPasswords = pgTable(
  'app_passwords',
  {
    id: text('id').primaryKey(),
    userId: text('user_id').notNull(),
    domainId: text('domain_id'),
    label: text('label').notNull(),
    address: text('address').notNull(),
    protocols: jsonb('protocols').$type<('imap' | 'api' | 'smtp')[]>().notNull(),
    keyPrefix: text('key_prefix').notNull(),
    secretHash: text('secret_hash').notNull(),
    legacy: boolean('legacy').notNull().default(false),
    createdAt: ms('created_at').notNull(),
    lastUsedAt: ms('last_used_at'),
  },
  (t) => [uniqueIndex('app_passwords_secret_uq').on(t.secretHash), index('app_passwords_user_idx').on(t.userId)],
);

/**
 * One IMAP folder of one address (`INBOX`, `Sent`, `Drafts`). `uid_validity` never changes;
 * `uid_next` only grows (it is the UIDNEXT an IMAP client is told).
 */
export const mailboxes = pgTable(
  'mailboxes',
  {
    id: text('id').primaryKey(),
    userId: text('user_id').notNull(),
    domainId: text('domain_id').notNull(),
    address: text('address').notNull(),
    name: text('name').notNull(),
    uidValidity: integer('uid_validity').notNull(),
    uidNext: integer('uid_next').notNull().default(1),
    createdAt: ms('created_at').notNull(),
  },
  (t) => [
    uniqueIndex('mailboxes_domain_address_name_uq').on(t.domainId, t.address, t.name),
    index('mailboxes_domain_idx').on(t.domainId),
  ],
);

/**
 * The raw bytes of mailbox messages, stored once however many mailbox rows refer to them (an inbound
 * message to 20 addresses is one body and 20 rows). A body goes when its last row goes. The storage
 * quota sums `size` per account (the index answers that sum alone).
 */
export const mailboxBodies = pgTable(
  'mailbox_bodies',
  {
    id: text('id').primaryKey(),
    userId: text('user_id').notNull(),
    size: integer('size').notNull(),
    raw: bytea('raw').notNull(),
    createdAt: ms('created_at').notNull(),
  },
  (t) => [index('mailbox_bodies_user_idx').on(t.userId, t.size)],
);

/**
 * A message filed into a mailbox. `uid` comes from one sequence for all mailboxes, so it is unique
 * service-wide (the mailbox API addresses messages by it) and ascends within each mailbox. Its bytes
 * are the body `body_id` names (shared by the rows of one delivery).
 */
export const mailboxMessages = pgTable(
  'mailbox_messages',
  {
    uid: serial('uid').primaryKey(),
    mailboxId: text('mailbox_id').notNull(),
    messageId: text('message_id'),
    flags: jsonb('flags').$type<string[]>().notNull(),
    fromAddr: text('from_addr').notNull(),
    toAddr: text('to_addr').notNull(),
    subject: text('subject'),
    size: integer('size').notNull(),
    bodyId: text('body_id').notNull(),
    internalDate: ms('internal_date').notNull(),
  },
  (t) => [
    index('mailbox_messages_mailbox_idx').on(t.mailboxId, t.uid),
    index('mailbox_messages_body_idx').on(t.bodyId),
  ],
);
