import { index, jsonb, pgTable, text, uniqueIndex } from 'drizzle-orm/pg-core';
import { users } from './accounts.js';
import { ms } from './columns.js';

/** Public OAuth clients from dynamic registration (RFC 7591): no secret, PKCE only. */
export const oauthClients = pgTable('oauth_clients', {
  id: text('id').primaryKey(),
  name: text('name'),
  redirectUris: jsonb('redirect_uris').$type<string[]>().notNull(),
  grantTypes: jsonb('grant_types').$type<string[]>().notNull(),
  responseTypes: jsonb('response_types').$type<string[]>().notNull(),
  createdAt: ms('created_at').notNull(),
});

/**
 * One linked app on one account: the family of tokens one authorization code started. Revoking it
 * (user, replayed code, reused refresh token, RFC 7009) stops every token of the family at once.
 */
export const oauthGrants = pgTable(
  'oauth_grants',
  {
    id: text('id').primaryKey(),
    userId: text('user_id')
      .notNull()
      .references(() => users.id, { onDelete: 'cascade' }),
    clientId: text('client_id')
      .notNull()
      .references(() => oauthClients.id, { onDelete: 'cascade' }),
    scope: text('scope').notNull(),
    createdAt: ms('created_at').notNull(),
    lastUsedAt: ms('last_used_at'),
    revokedAt: ms('revoked_at'),
    revokedReason: text('revoked_reason'),
  },
  (t) => [index('oauth_grants_user_idx').on(t.userId, t.createdAt)],
);

/** Authorization codes: stored hashed, single-use, short-lived; `grantId` is set by the exchange that used it. */
export const oauthCodes = pgTable(
  'oauth_codes',
  {
    id: text('id').primaryKey(),
    codeHash: text('code_hash').notNull(),
    clientId: text('client_id')
      .notNull()
      .references(() => oauthClients.id, { onDelete: 'cascade' }),
    userId: text('user_id')
      .notNull()
      .references(() => users.id, { onDelete: 'cascade' }),
    redirectUri: text('redirect_uri').notNull(),
    codeChallenge: text('code_challenge').notNull(),
    scope: text('scope').notNull(),
    expiresAt: ms('expires_at').notNull(),
    usedAt: ms('used_at'),
    grantId: text('grant_id'),
    createdAt: ms('created_at').notNull(),
  },
  (t) => [uniqueIndex('oauth_codes_hash_uq').on(t.codeHash), index('oauth_codes_expires_idx').on(t.expiresAt)],
);

/** Refresh tokens: stored hashed, single-use; each use writes the next one of the same grant. */
export const oauthRefreshTokens = pgTable(
  'oauth_refresh_tokens',
  {
    id: text('id').primaryKey(),
    tokenHash: text('token_hash').notNull(),
    grantId: text('grant_id')
      .notNull()
      .references(() => oauthGrants.id, { onDelete: 'cascade' }),
    expiresAt: ms('expires_at').notNull(),
    usedAt: ms('used_at'),
    createdAt: ms('created_at').notNull(),
  },
  (t) => [uniqueIndex('oauth_refresh_hash_uq').on(t.tokenHash), index('oauth_refresh_grant_idx').on(t.grantId)],
);
