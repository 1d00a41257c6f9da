import { and, eq, type SQL } from 'drizzle-orm';
import type { PgColumn } from 'drizzle-orm/pg-core';
import type { Principal } from './auth.js';

/**
 * Who acts: an account, or a domain-scoped key that sees only its one domain. Every loader takes one.
 * `keyId` names that key (the mail it sends records it, so revoking the key stops mail still waiting).
 */
export type Actor = { userId: string; domainId?: string; keyId?: string };

/** The one place a credential becomes an actor. */
export const actorOf = (p: Principal): Actor => (p.kind === 'scoped_key' ? { userId: p.userId, domainId: p.domainId, keyId: p.keyId } : { userId: p.userId });

/** True for an actor limited to one domain (account-wide secrets and settings are not for it). */
export const isScoped = (actor: Actor): boolean => actor.domainId !== undefined;

/**
 * The row filter of an actor over a table with a user column and a domain column: the account's rows,
 * and of those only its domain's rows for a scoped key (a row without a domain is account-wide: hidden from it).
 */
export function ownedBy(actor: Actor, cols: { userId: PgColumn; domainId: PgColumn }): SQL {
  return actor.domainId ? and(eq(cols.userId, actor.userId), eq(cols.domainId, actor.domainId))! : eq(cols.userId, actor.userId);
}
