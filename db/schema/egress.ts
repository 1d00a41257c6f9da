import { index, integer, jsonb, pgTable, primaryKey, text } from 'drizzle-orm/pg-core';
import { ms } from './columns.js';

/**
 * Outbound transport policy (docs/transport-policy.md): the MTA-STS policies of recipient domains as
 * last fetched, the egress pool an operator assigned to an account, and the outcomes counted per
 * egress source and pool (the deliverability page and the operator's view).
 */

/**
 * The MTA-STS policy of one recipient domain (RFC 8461), fetched by `mtaStsFetchWorkflow`, never per
 * message. `status`: `ok` (a policy was read), `absent` (no `_mta-sts` record), `failed` (a record but
 * no policy could be read: `error` says why; delivery goes on as without a policy, RFC 8461 §5).
 */
export const mtaStsPolicies = pgTable('mta_sts_policies', {
  domain: text('domain').primaryKey(),
  /** The `id=` of the `_mta-sts` TXT record the policy was fetched for. */
  recordId: text('record_id'),
  status: text('status', { enum: ['ok', 'absent', 'failed'] }).notNull(),
  mode: text('mode', { enum: ['enforce', 'testing', 'none'] }),
  /** The policy's `mx:` patterns, lowercased (`*.example.net` matches one label). */
  mx: jsonb('mx').$type<string[]>().notNull().default([]),
  /** The policy's `max_age` in seconds. */
  maxAge: integer('max_age'),
  error: text('error'),
  fetchedAt: ms('fetched_at').notNull(),
  /** Until when the cached answer holds: `max_age` for a policy, a short retry delay for a failure. */
  expiresAt: ms('expires_at').notNull(),
});

/**
 * The egress pool an operator assigned to an account's mail (operator API), per stream: `all`,
 * `transactional` or `bulk`. A domain's own choice (`domains.email_provider_id`, pinned) wins over it.
 */
export const egressAssignments = pgTable(
  'egress_assignments',
  {
    userId: text('user_id').notNull(),
    stream: text('stream', { enum: ['all', 'transactional', 'bulk'] }).notNull(),
    pool: text('pool').notNull(),
    updatedAt: ms('updated_at').notNull(),
  },
  (t) => [primaryKey({ columns: [t.userId, t.stream] })],
);

/**
 * SMTP outcomes per account, egress source, pool and hour, written by the worker in one multi-row upsert
 * every few seconds (no SQL per message). `domain_id` is '' for system mail.
 */
export const egressCounters = pgTable(
  'egress_counters',
  {
    userId: text('user_id').notNull(),
    domainId: text('domain_id').notNull(),
    source: text('source').notNull(),
    pool: text('pool').notNull(),
    hour: ms('hour').notNull(),
    sent: integer('sent').notNull().default(0),
    deferred: integer('deferred').notNull().default(0),
    bounced: integer('bounced').notNull().default(0),
  },
  (t) => [
    primaryKey({ columns: [t.userId, t.domainId, t.source, t.pool, t.hour] }),
    index('egress_counters_hour_idx').on(t.hour),
  ],
);
