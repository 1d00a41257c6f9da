import { and, desc, eq, isNull, notInArray, sql, type SQL } from 'drizzle-orm';
import type { Db } from '../db/index.js';
import { schema } from '../db/index.js';

type UserRow = typeof schema.users.$inferSelect;

/**
 * A credential an account held before its address was proven. Anyone can make an account for an address
 * they do not own and fill it with keys; a sign-in or reset link mailed to the address is the first proof
 * that the person is its owner, so by default it revokes all of these (DESIGN.md, Accounts and ownership).
 */
export type UnprovenCredential = {
  /** What `keep` names: a key (`key_…`), app password (`apw_…`), linked app (`grt_…`), `password` or `sessions`. */
  id: string;
  kind: 'account_key' | 'scoped_key' | 'app_password' | 'linked_app' | 'password' | 'sessions';
  label: string;
};

/**
 * What a sign-in or reset link on an address never proven revokes unless the owner keeps it. A reset
 * replaces the password and ends every session anyway, so those two are listed for a sign-in link only.
 */
export async function unprovenCredentials(
  db: Db,
  user: UserRow,
  opts: { passwordReplaced: boolean },
): Promise<UnprovenCredential[]> {
  const k = schema.apiKeys;
  const p = schema.appPasswords;
  const g = schema.oauthGrants;
  const d = schema.domains;
  const [keys, passwords, grants] = await Promise.all([
    db
      .select({ id: k.id, kind: k.kind, name: k.name, domain: d.domain })
      .from(k)
      .leftJoin(d, eq(d.id, k.domainId))
      .where(eq(k.userId, user.id))
      .orderBy(desc(k.createdAt)),
    db
      .select({ id: p.id, label: p.label, address: p.address, domain: d.domain })
      .from(p)
      .leftJoin(d, eq(d.id, p.domainId))
      .where(eq(p.userId, user.id))
      .orderBy(desc(p.createdAt)),
    db
      .select({ id: g.id, name: schema.oauthClients.name })
      .from(g)
      .innerJoin(schema.oauthClients, eq(schema.oauthClients.id, g.clientId))
      .where(and(eq(g.userId, user.id), isNull(g.revokedAt)))
      .orderBy(desc(g.createdAt)),
  ]);
  return [
    ...keys.map((r): UnprovenCredential =>
      r.kind === 'account'
        ? { id: r.id, kind: 'account_key', label: 'The account API key (svc_live_…)' }
        : {
            id: r.id,
            kind: 'scoped_key',
            label: `Domain-scoped key${r.name ? ` “${r.name}”` : ''} for ${r.domain ?? 'a removed domain'}`,
          },
    ),
    ...passwords.map((r): UnprovenCredential => ({
      id: r.id,
      kind: 'app_password',
      label: `App password “${r.label}” for ${r.address}@${r.domain ?? '*'}`,
    })),
    ...grants.map((r): UnprovenCredential => ({
      id: r.id,
      kind: 'linked_app',
      label: `Linked app ${r.name ?? '(no name)'}`,
    })),
    ...(user.passwordHash && !opts.passwordReplaced
      ? [
          { id: 'password', kind: 'password', label: 'The password' } as const,
          { id: 'sessions', kind: 'sessions', label: 'Every signed-in session' } as const,
        ]
      : []),
  ];
}

/**
 * Proves the address by a sign-in or reset link: in one transaction that re-checks, under a row lock, that
 * the address is still unproven, revokes every credential not in `keep` and marks the address verified.
 * Answers the ids revoked (none when the address was proven meanwhile). Keys and app passwords are deleted
 * (open IMAP sessions end at their next command), linked apps revoked with their tokens, the password
 * cleared, and every session ended by moving the session version.
 */
export async function proveAddress(
  db: Db,
  userId: string,
  opts: { keep: readonly string[]; passwordReplaced: boolean },
): Promise<string[]> {
  const keep = [...new Set(opts.keep)];
  const notKept = (column: Parameters<typeof notInArray>[0]): SQL | undefined =>
    keep.length ? notInArray(column, keep) : undefined;
  return db.transaction(async (tx) => {
    const [user] = await tx
      .select({ verified: schema.users.emailVerified })
      .from(schema.users)
      .where(eq(schema.users.id, userId))
      .for('update');
    if (!user || user.verified) return [];
    const now = Date.now();
    const keys = await tx
      .delete(schema.apiKeys)
      .where(and(eq(schema.apiKeys.userId, userId), notKept(schema.apiKeys.id)))
      .returning({ id: schema.apiKeys.id });
    const passwords = await tx
      .delete(schema.appPasswords)
      .where(and(eq(schema.appPasswords.userId, userId), notKept(schema.appPasswords.id)))
      .returning({ id: schema.appPasswords.id });
    const grants = await tx
      .update(schema.oauthGrants)
      .set({ revokedAt: now, revokedReason: 'address_proven' })
      .where(
        and(
          eq(schema.oauthGrants.userId, userId),
          isNull(schema.oauthGrants.revokedAt),
          notKept(schema.oauthGrants.id),
        ),
      )
      .returning({ id: schema.oauthGrants.id });
    const clearPassword = !opts.passwordReplaced && !keep.includes('password');
    const endSessions = !keep.includes('sessions');
    await tx
      .update(schema.users)
      .set({
        emailVerified: true,
        updatedAt: now,
        ...(clearPassword ? { passwordHash: null } : {}),
        ...(endSessions ? { sessionVersion: sql`${schema.users.sessionVersion} + 1` } : {}),
      })
      .where(eq(schema.users.id, userId));
    return [...keys, ...passwords, ...grants]
      .map((r) => r.id)
      .concat(clearPassword ? ['password'] : [], endSessions ? ['sessions'] : []);
  });
}
