import { bigint, integer, pgTable, primaryKey, text } from 'drizzle-orm/pg-core';

/**
 * Bytes of stored mail per account, kept as a running total so that the SMTP door and every storage writer
 * read one row instead of summing an account's messages: mailbox bodies are added and removed by a trigger
 * on `mailbox_bodies` (migration 0021, whatever path inserts or deletes them), and the inbound path adds
 * the sealed copies of encrypted domains. Stored attachments expire by time, so they are summed apart.
 */
export const storageUsage = pgTable('storage_usage', {
  userId: text('user_id').primaryKey(),
  bytes: bigint('bytes', { mode: 'number' }).notNull().default(0),
});

/** Inbound mail stored per account and UTC day (`day`: the day's first ms), for the daily allowance of unverified accounts. */
export const inboundDaily = pgTable(
  'inbound_daily',
  {
    userId: text('user_id').notNull(),
    day: bigint('day', { mode: 'number' }).notNull(),
    messages: integer('messages').notNull().default(0),
    bytes: bigint('bytes', { mode: 'number' }).notNull().default(0),
  },
  (t) => [primaryKey({ columns: [t.userId, t.day] })],
);
