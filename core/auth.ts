import type { AccountService } from './accounts.js';
import { forbidden, unauthorized } from './errors.js';
import { KIND_LABEL, type CredentialKind, type MailboxScope, type Principal } from './tenancy.js';
import { KEY_PREFIX, type KeyService } from './keys.js';
import { looksLikeJwt, type TokenService } from './tokens.js';

/** Answers whether an OAuth grant still stands (not revoked); checked on every OAuth-token request. */
export type GrantCheck = { isActive(grantId: string, userId: string): Promise<boolean> };
/** Checks an app password for the mailbox API (given late: the mailbox service is composed after auth). */
type MailboxAuth = (secret: string, ip: string) => Promise<MailboxScope>;

export function createAuthService(deps: {
  keys: KeyService;
  tokens: TokenService;
  accounts: AccountService;
  grants: GrantCheck;
  mailboxAuth: () => MailboxAuth;
}) {
  return {
    /**
     * Resolves a bearer credential; undefined when none was sent, 401 when it is not valid now.
     * App passwords are looked at only where `opts.appPasswords` says so (the /api/mailbox/* operations).
     */
    async authenticate(
      authorization: string | undefined,
      opts: { appPasswords?: boolean; ip?: string } = {},
    ): Promise<Principal | undefined> {
      if (authorization === undefined || authorization === '') return undefined;
      const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
      if (!match) throw unauthorized('Authorization must be "Bearer <credential>"');
      const secret = match[1]!;
      if (secret.startsWith('svc_pw_') || secret.startsWith('svc_imap_')) {
        if (opts.appPasswords) {
          const scope = await deps.mailboxAuth()(secret, opts.ip ?? '');
          return { kind: 'app_password', userId: scope.userId, scope };
        }
        throw forbidden('App passwords are accepted only on /api/mailbox/*', 'wrong_credential');
      }
      if (secret.startsWith(KEY_PREFIX)) return fromKey(secret);
      if (looksLikeJwt(secret)) {
        const claims = await deps.tokens.verify(secret);
        const user = await deps.accounts.getUser(claims.userId);
        if (!user) throw unauthorized('Account no longer exists');
        if (claims.kind === 'session') {
          if ((claims.version ?? 0) !== user.sessionVersion)
            throw unauthorized('This session was signed out; sign in again', 'session_revoked');
          return { kind: 'session', userId: claims.userId };
        }
        // An OAuth access token lives only as long as its grant: a revoked grant stops it before it expires.
        if (!claims.grantId || !(await deps.grants.isActive(claims.grantId, claims.userId))) {
          throw unauthorized('This access token was revoked', 'token_revoked');
        }
        return {
          kind: 'oauth',
          userId: claims.userId,
          grantId: claims.grantId,
          ...(claims.clientId ? { clientId: claims.clientId } : {}),
          ...(claims.audience ? { audience: claims.audience } : {}),
        };
      }
      throw unauthorized('Unrecognized credential');
    },
  };

  async function fromKey(secret: string): Promise<Principal> {
    const principal = await keyPrincipal(deps.keys, secret);
    if (!principal) throw unauthorized('Invalid or revoked API key', 'invalid_key');
    return principal;
  }
}

/** The principal of an API key (account or domain-scoped), its last use kept; undefined when it is not a live key. */
export async function keyPrincipal(keys: KeyService, secret: string): Promise<Principal | undefined> {
  const row = await keys.lookup(secret);
  if (!row) return undefined;
  await keys.touch(row);
  if (row.kind === 'scoped' && row.domainId)
    return { kind: 'scoped_key', userId: row.userId, keyId: row.id, domainId: row.domainId };
  return { kind: 'account_key', userId: row.userId, keyId: row.id };
}
export type AuthService = ReturnType<typeof createAuthService>;

/** Throws 401 without a credential and 403 for a credential kind the operation does not take. */
export function requireKind(principal: Principal | undefined, allowed: readonly CredentialKind[]): Principal {
  if (!principal) throw unauthorized('Missing credentials: send "Authorization: Bearer <credential>"');
  if (!allowed.includes(principal.kind)) {
    const wanted = allowed.map((k) => KIND_LABEL[k]).join(' or ');
    throw forbidden(`This endpoint does not accept ${KIND_LABEL[principal.kind]}; use ${wanted}`, 'wrong_credential');
  }
  return principal;
}
