import { and, eq, isNull } from 'drizzle-orm';
import type { Db } from '../db/index.js';
import { schema } from '../db/index.js';

type UserRow = typeof schema.users.$inferSelect;

/** How an account came to be: shown to the address's owner before they confirm it is theirs. */
export type AccountOrigin = {
  via: 'provision' | 'signup' | 'consent' | null;
  channel: string | null;
  /** The app whose consent page the account was made on (`consent`). */
  app: { clientId: string; name: string | null } | null;
  createdAt: number;
  clientIp: string | null;
};

/** What the account already holds: every credential or link someone else could be using. */
export type AccountHoldings = {
  accountKey: boolean;
  scopedKeys: { name: string | null; domain: string | null }[];
  appPasswords: { label: string; domain: string | null; address: string }[];
  routes: { domain: string | null; pattern: string; action: string; destination: string | null }[];
  linkedApps: { name: string | null; since: number }[];
  domains: { domain: string; status: string }[];
  password: boolean;
};

export type AccountDetails = {
  email: string;
  emailVerified: boolean;
  origin: AccountOrigin;
  holdings: AccountHoldings;
};

/** Where a route sends mail: a forward's address, a webhook's host (its path may carry a secret), else nothing. */
function destinationOf(r: { action: string; destination: string | null }): string | null {
  if (r.action === 'forward') return r.destination;
  if (r.action !== 'webhook' || !r.destination) return null;
  try {
    return new URL(r.destination).host;
  } catch {
    return null;
  }
}

/** Reads how an account was made and what it holds (read only: the verification page and its JSON twin). */
export async function accountDetails(db: Db, user: UserRow): Promise<AccountDetails> {
  const id = user.id;
  const domainName = new Map(
    (
      await db
        .select({ id: schema.domains.id, domain: schema.domains.domain, status: schema.domains.status })
        .from(schema.domains)
        .where(eq(schema.domains.userId, id))
    ).map((d) => [d.id, d]),
  );
  const nameOf = (domainId: string | null) => (domainId ? (domainName.get(domainId)?.domain ?? null) : null);
  const [keys, passwords, routes, grants, app] = await Promise.all([
    db
      .select({ kind: schema.apiKeys.kind, name: schema.apiKeys.name, domainId: schema.apiKeys.domainId })
      .from(schema.apiKeys)
      .where(eq(schema.apiKeys.userId, id)),
    db
      .select({
        label: schema.appPasswords.label,
        domainId: schema.appPasswords.domainId,
        address: schema.appPasswords.address,
      })
      .from(schema.appPasswords)
      .where(eq(schema.appPasswords.userId, id)),
    db
      .select({
        domainId: schema.routes.domainId,
        pattern: schema.routes.pattern,
        action: schema.routes.action,
        destination: schema.routes.destination,
      })
      .from(schema.routes)
      .where(eq(schema.routes.userId, id)),
    db
      .select({ name: schema.oauthClients.name, since: schema.oauthGrants.createdAt })
      .from(schema.oauthGrants)
      .innerJoin(schema.oauthClients, eq(schema.oauthClients.id, schema.oauthGrants.clientId))
      .where(and(eq(schema.oauthGrants.userId, id), isNull(schema.oauthGrants.revokedAt))),
    user.createdClientId
      ? db
          .select({ id: schema.oauthClients.id, name: schema.oauthClients.name })
          .from(schema.oauthClients)
          .where(eq(schema.oauthClients.id, user.createdClientId))
      : Promise.resolve([]),
  ]);
  return {
    email: user.email,
    emailVerified: user.emailVerified,
    origin: {
      via: user.createdVia ?? null,
      channel: user.channel ?? null,
      createdAt: user.createdAt,
      clientIp: user.createdIp ?? null,
      app: user.createdClientId ? { clientId: user.createdClientId, name: app[0]?.name ?? null } : null,
    },
    holdings: {
      accountKey: keys.some((k) => k.kind === 'account'),
      scopedKeys: keys.filter((k) => k.kind === 'scoped').map((k) => ({ name: k.name, domain: nameOf(k.domainId) })),
      appPasswords: passwords.map((p) => ({ label: p.label, domain: nameOf(p.domainId), address: p.address })),
      routes: routes.map((r) => ({
        domain: nameOf(r.domainId),
        pattern: r.pattern,
        action: r.action,
        destination: destinationOf(r),
      })),
      linkedApps: grants.map((g) => ({ name: g.name, since: g.since })),
      domains: [...domainName.values()].map((d) => ({ domain: d.domain, status: d.status })),
      password: user.passwordHash !== null,
    },
  };
}
