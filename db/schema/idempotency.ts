import { index, integer, pgTable, primaryKey, text } from 'drizzle-orm/pg-core';
import { users } from './accounts.js';
import { ms } from './columns.js';

/**
 * Idempotency keys (docs/idempotency.md): one row per (account, key), inserted as a claim BEFORE the
 * work runs, so concurrent requests with one key, in any API process, find it and never run twice.
 * `state` is `running` while the first request works (its process renews `lease_until`), then `done`
 * with the answer kept (sealed: a create may answer a secret) until `expires_at`.
 */
export const idempotencyKeys = pgTable(
  'idempotency_keys',
  {
    userId: text('user_id')
      .notNull()
      .references(() => users.id, { onDelete: 'cascade' }),
    key: text('key').notNull(),
    /** sha256 of the operation, the credential's domain scope and the validated input. */
    fingerprint: text('fingerprint').notNull(),
    operation: text('operation').notNull(),
    state: text('state', { enum: ['running', 'done'] }).notNull(),
    /** Random per claim: only the request that holds the claim may finish or release it. */
    claimToken: text('claim_token').notNull(),
    /** While running: the claim is abandoned (its process died) once this passes. */
    leaseUntil: ms('lease_until').notNull(),
    responseStatus: integer('response_status'),
    /** The answer's JSON, sealed with SECRET_KEY. */
    responseSealed: text('response_sealed'),
    createdAt: ms('created_at').notNull(),
    expiresAt: ms('expires_at').notNull(),
  },
  (t) => [primaryKey({ columns: [t.userId, t.key] }), index('idempotency_keys_expires_idx').on(t.expiresAt)],
);
