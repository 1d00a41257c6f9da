import { and, eq, type SQL } from 'drizzle-orm';
import type { PgColumn } from 'drizzle-orm/pg-core';

/** The protocols an app password can grant. */
export type Protocol = 'imap' | 'api' | 'smtp';

/** What a password may open: the account, one domain (null for legacy), and a local-part pattern. */
export type MailboxScope = {
  passwordId: string;
  secretHash: string;
  userId: string;
  domainId: string | null;
  domain: string;
  pattern: string;
  protocols: Protocol[];
  legacy: boolean;
};

/** Who is calling, as told apart from the one `Authorization: Bearer` header (DESIGN.md, wire conventions). */
export type Principal =
  | { kind: 'session'; userId: string }
  | { kind: 'oauth'; userId: string; clientId?: string; grantId: string; audience?: string }
  | { kind: 'account_key'; userId: string; keyId: string }
  | { kind: 'scoped_key'; userId: string; keyId: string; domainId: string }
  | { kind: 'app_password'; userId: string; scope: MailboxScope };
export type CredentialKind = Principal['kind'];

export const KIND_LABEL: Record<CredentialKind, string> = {
  session: 'a session token',
  oauth: 'an OAuth access token',
  account_key: 'the account key',
  scoped_key: 'a domain-scoped key',
  app_password: 'an app password',
};

/**
 * Who acts: an account, or a domain-scoped key that sees only its one domain. Every loader takes one.
 * `keyId` names that key (the mail it sends records it, so revoking the key stops mail still waiting).
 */
export type Actor = { userId: string; domainId?: string; keyId?: string };

/** The one place a credential becomes an actor. */
export const actorOf = (p: Principal): Actor =>
  p.kind === 'scoped_key' ? { userId: p.userId, domainId: p.domainId, keyId: p.keyId } : { userId: p.userId };

/** True for an actor limited to one domain (account-wide secrets and settings are not for it). */
export const isScoped = (actor: Actor): boolean => actor.domainId !== undefined;

/**
 * The row filter of an actor over a table with a user column and a domain column: the account's rows,
 * and of those only its domain's rows for a scoped key (a row without a domain is account-wide: hidden from it).
 */
export function ownedBy(actor: Actor, cols: { userId: PgColumn; domainId: PgColumn }): SQL {
  return actor.domainId
    ? and(eq(cols.userId, actor.userId), eq(cols.domainId, actor.domainId))!
    : eq(cols.userId, actor.userId);
}
