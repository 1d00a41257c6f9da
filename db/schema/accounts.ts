import { sql } from 'drizzle-orm';
import { boolean, index, integer, pgTable, text, uniqueIndex } from 'drizzle-orm/pg-core';
import { ms } from './columns.js';

/** Accounts (`usr_`). A provisioned account has no password until one is set. */
export const users = pgTable(
  'users',
  {
    id: text('id').primaryKey(),
    email: text('email').notNull(),
    passwordHash: text('password_hash'),
    emailVerified: boolean('email_verified').notNull().default(false),
    plan: text('plan').notNull(),
    channel: text('channel'),
    ref: text('ref'),
    referrer: text('referrer'),
    /** How the account was made: `provision` (POST /api/v1/provision), `signup`, or `consent` (signed up on an app's consent page). */
    createdVia: text('created_via', { enum: ['provision', 'signup', 'consent'] }),
    /** The client address that made the account (shown on the verification page). */
    createdIp: text('created_ip'),
    /** The OAuth client whose consent page the account was made on (`consent` only). */
    createdClientId: text('created_client_id'),
    /** The account webhook secret (`whsec_…`), sealed: signs tracking-webhook events and is the fallback key. */
    webhookSecretSealed: text('webhook_secret_sealed'),
    /** Postal address for the CAN-SPAM footer of broadcasts; prefills a broadcast's `footer_address`. */
    footerAddress: text('footer_address'),
    /** Bumped to revoke every session token issued before (password change or reset, sign-out). */
    sessionVersion: integer('session_version').notNull().default(0),
    /** Set by an operator to stop every sending path of the account (docs/sending.md, The send gate); null = in good standing. */
    suspendedAt: ms('suspended_at'),
    createdAt: ms('created_at').notNull(),
    updatedAt: ms('updated_at').notNull(),
  },
  (t) => [uniqueIndex('users_email_uq').on(t.email)],
);

/**
 * API keys (`svc_live_…`): the one account key per account (kind `account`) and domain-scoped keys
 * (kind `scoped`, id `key_…`). Looked up by hash; sealed copy kept because SPEC.md shows them again.
 */
export const apiKeys = pgTable(
  'api_keys',
  {
    id: text('id').primaryKey(),
    userId: text('user_id')
      .notNull()
      .references(() => users.id, { onDelete: 'cascade' }),
    kind: text('kind', { enum: ['account', 'scoped'] }).notNull(),
    domainId: text('domain_id'),
    name: text('name'),
    keyHash: text('key_hash').notNull(),
    keySealed: text('key_sealed').notNull(),
    createdAt: ms('created_at').notNull(),
    lastUsedAt: ms('last_used_at'),
  },
  (t) => [
    uniqueIndex('api_keys_hash_uq').on(t.keyHash),
    uniqueIndex('api_keys_one_account_key_uq')
      .on(t.userId)
      .where(sql`kind = 'account'`),
    index('api_keys_user_idx').on(t.userId, t.kind),
  ],
);

/** One-time tokens mailed to the account: email verification, magic-link sign-in, password reset. Stored hashed. */
export const authTokens = pgTable(
  'auth_tokens',
  {
    id: text('id').primaryKey(),
    userId: text('user_id')
      .notNull()
      .references(() => users.id, { onDelete: 'cascade' }),
    purpose: text('purpose', { enum: ['verify_email', 'signin', 'reset_password'] }).notNull(),
    tokenHash: text('token_hash').notNull(),
    expiresAt: ms('expires_at').notNull(),
    usedAt: ms('used_at'),
    createdAt: ms('created_at').notNull(),
  },
  (t) => [uniqueIndex('auth_tokens_hash_uq').on(t.tokenHash)],
);
