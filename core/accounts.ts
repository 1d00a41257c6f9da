import { and, eq, gt, inArray, isNull, sql } from 'drizzle-orm';
import type { Db } from '../db/index.js';
import { schema } from '../db/index.js';
import { accountDetails, type AccountDetails } from './account-details.js';
import type { AccountRemoval } from './account-removal.js';
import { badRequest, conflict, unauthorized } from './errors.js';
import { newId, randomToken } from './ids.js';
import type { KeyService } from './keys.js';
import type { SystemMailer } from './transport/system-mail.js';
import { createSharedRateLimiter } from './rate-limit.js';
import { credentialHash, hashPassword, verifyPassword } from './secrets.js';
import type { TokenService } from './tokens.js';
import { proveAddress, unprovenCredentials, type UnprovenCredential } from './unproven-credentials.js';

export type UserRow = typeof schema.users.$inferSelect;
export type PublicUser = { id: string; email: string; emailVerified: boolean; plan: string; createdAt: number };

const VERIFY_TTL_MS = 7 * 24 * 3600_000;
const SIGNIN_TTL_MS = 15 * 60_000;
const RESET_TTL_MS = 30 * 60_000;
/** Sign-in, reset and verification mails one address can be sent per hour (each kind counted on its own). */
const MAILS_PER_HOUR = 5;
type TokenPurpose = 'verify_email' | 'signin' | 'reset_password';

/** Builds the URL a mailed token is put in; the default links go to the pages /auth/verify and /auth/signin. */
export type MailLink = (token: string) => string;
/** Where an account was made: recorded at creation and shown on the verification page. */
export type AccountOriginInput = { via: 'provision' | 'signup' | 'consent'; clientIp: string; clientId?: string };
/** What a mailed link leads to: its kind and the account it belongs to (how it was made, what it holds). */
export type LinkDetails = AccountDetails & { purpose: TokenPurpose; credentials: UnprovenCredential[] };
/** Ids of credentials the owner keeps when a sign-in or reset link proves an address (the rest are revoked). */
type Keep = { keep?: readonly string[] };

export const normalizeEmail = (email: string) => email.trim().toLowerCase();
export const toPublicUser = (u: UserRow): PublicUser => ({
  id: u.id,
  email: u.email,
  emailVerified: u.emailVerified,
  plan: u.plan,
  createdAt: u.createdAt,
});

/** Accounts: signup, login, provisioning, magic-link sign-in, email verification and passwords. */
export function createAccountService(deps: {
  db: Db;
  keys: KeyService;
  tokens: TokenService;
  mailer: SystemMailer;
  publicUrl: string;
  defaultPlan: string;
  signupLimitPerHour: number;
  removal: AccountRemoval;
}) {
  const { db } = deps;
  // Failed sign-ins are bounded per address (whatever the client) and per client address (whatever the account).
  // In PostgreSQL: every API process counts in the same windows.
  const loginLimiter = createSharedRateLimiter(db, 'login', {
    limit: 10,
    windowMs: 15 * 60_000,
    message: 'Too many failed sign-in attempts; try again later',
  });
  const loginIpLimiter = createSharedRateLimiter(db, 'login_ip', {
    limit: 30,
    windowMs: 15 * 60_000,
    message: 'Too many failed sign-in attempts from this address; try again later',
    perAddress: true,
  });
  // Account creation mails a link to an address the caller chose: bounded per client so it cannot be used to spam.
  const createLimiter = createSharedRateLimiter(db, 'create', {
    limit: deps.signupLimitPerHour,
    windowMs: 3600_000,
    message: 'Too many accounts created from this address; try again later',
    perAddress: true,
  });
  // Mailed links are bounded per address so they cannot flood an inbox. Someone else can use up that budget,
  // so the link that uses it up stays valid until the budget comes back: the owner always has one to follow.
  const mailLimiter = createSharedRateLimiter(db, 'mail', {
    limit: MAILS_PER_HOUR,
    windowMs: 3600_000,
    message:
      'Too many emails requested for this address; the last link mailed to it stays valid until more can be sent',
  });
  /** How long a mailed link lives: its own time, or to the end of the address's mail window if it used up the window. */
  const linkTtl = (ttlMs: number, w: { count: number; windowEnd: number }) =>
    w.count >= MAILS_PER_HOUR ? Math.max(ttlMs, w.windowEnd - Date.now()) : ttlMs;

  async function findByEmail(email: string): Promise<UserRow | undefined> {
    const [row] = await db
      .select()
      .from(schema.users)
      .where(eq(schema.users.email, normalizeEmail(email)));
    return row;
  }

  async function createUser(
    values: { email: string; passwordHash?: string; channel?: string; ref?: string; referrer?: string },
    origin: AccountOriginInput,
  ) {
    const now = Date.now();
    const rows = await db
      .insert(schema.users)
      .values({
        id: newId('usr'),
        email: normalizeEmail(values.email),
        passwordHash: values.passwordHash ?? null,
        plan: deps.defaultPlan,
        channel: values.channel ?? null,
        ref: values.ref ?? null,
        referrer: values.referrer ?? null,
        createdAt: now,
        updatedAt: now,
        createdVia: origin.via,
        createdIp: origin.clientIp.replace(/^::ffff:(?=[\d.]+$)/, '') || null,
        createdClientId: origin.clientId ?? null,
      })
      .onConflictDoNothing()
      .returning();
    if (!rows[0]) throw conflict('An account with this email already exists', 'account_exists');
    return rows[0];
  }

  async function mintOneTimeToken(userId: string, purpose: TokenPurpose, ttlMs: number): Promise<string> {
    const token = randomToken(32);
    const now = Date.now();
    await db.insert(schema.authTokens).values({
      id: newId('tok'),
      userId,
      purpose,
      tokenHash: credentialHash(token),
      expiresAt: now + ttlMs,
      createdAt: now,
    });
    return token;
  }

  /** The live (unused, unexpired) token row of a mailed link, without using it up. */
  async function peekToken(token: string) {
    const [row] = await db
      .select()
      .from(schema.authTokens)
      .where(
        and(
          eq(schema.authTokens.tokenHash, credentialHash(token)),
          isNull(schema.authTokens.usedAt),
          gt(schema.authTokens.expiresAt, Date.now()),
        ),
      );
    const user = row && (await getUser(row.userId));
    if (!row || !user) throw unauthorized('This link is invalid, already used or expired', 'invalid_token');
    return { purpose: row.purpose, user };
  }

  /** Marks a one-time token used and returns its user; unknown, used or expired tokens are all 401. */
  async function consumeOneTimeToken(token: string, purposes: TokenPurpose[]): Promise<UserRow> {
    return (await consumeLink(token, purposes)).user;
  }

  /** The same, answering the kind of link it was too. */
  async function consumeLink(
    token: string,
    purposes: TokenPurpose[],
  ): Promise<{ user: UserRow; purpose: TokenPurpose }> {
    const now = Date.now();
    const [used] = await db
      .update(schema.authTokens)
      .set({ usedAt: now })
      .where(
        and(
          eq(schema.authTokens.tokenHash, credentialHash(token)),
          inArray(schema.authTokens.purpose, purposes),
          isNull(schema.authTokens.usedAt),
          gt(schema.authTokens.expiresAt, now),
        ),
      )
      .returning();
    if (!used) throw unauthorized('This link is invalid, already used or expired', 'invalid_token');
    const user = await getUser(used.userId);
    if (!user) throw unauthorized('This link is invalid, already used or expired', 'invalid_token');
    return { user, purpose: used.purpose as TokenPurpose };
  }

  /**
   * Following a mailed link proves the address. A verification link keeps everything the account holds
   * (SPEC.md: the provisioned key goes on working); a sign-in or reset link on an address never proven
   * revokes every credential made before, except those the owner keeps.
   */
  async function prove(
    user: UserRow,
    purpose: TokenPurpose,
    opts: Keep & { passwordReplaced?: boolean } = {},
  ): Promise<void> {
    if (user.emailVerified) return;
    if (purpose === 'verify_email') return markVerified(user.id);
    await proveAddress(db, user.id, { keep: opts.keep ?? [], passwordReplaced: opts.passwordReplaced ?? false });
  }

  async function sendVerification(user: UserRow, mailLink?: MailLink): Promise<void> {
    const token = await mintOneTimeToken(user.id, 'verify_email', VERIFY_TTL_MS);
    const link = mailLink ? mailLink(token) : `${deps.publicUrl}/auth/verify?token=${token}`;
    await deps.mailer.send({
      userId: user.id,
      to: user.email,
      subject: 'Verify your email address',
      text:
        `Confirm ${user.email} to start sending:\n\n${link}\n\nThe page shows how the account was made and what it holds before you confirm. ` +
        `If you did not ask for an account, open the link and choose "I did not ask for this": the account and everything in it is deleted.\n\n` +
        `From an API client: POST ${deps.publicUrl}/api/auth/verify {"token":"${token}"}\n\nThe link works once and expires in 7 days.`,
    });
  }

  async function getUser(id: string): Promise<UserRow | undefined> {
    const [row] = await db.select().from(schema.users).where(eq(schema.users.id, id));
    return row;
  }

  async function session(user: UserRow) {
    return {
      token: await deps.tokens.issue({ userId: user.id, kind: 'session', version: user.sessionVersion }),
      user: toPublicUser(user),
    };
  }

  return {
    getUser,

    async footerAddress(userId: string): Promise<string | null> {
      const [row] = await db
        .select({ footer: schema.users.footerAddress })
        .from(schema.users)
        .where(eq(schema.users.id, userId));
      return row?.footer ?? null;
    },

    /** Sets (or, with null or blank, clears) the postal address that prefills new broadcasts' CAN-SPAM footer. */
    async setFooterAddress(userId: string, address: string | null): Promise<string | null> {
      const footer = address?.trim() || null;
      await db.update(schema.users).set({ footerAddress: footer }).where(eq(schema.users.id, userId));
      return footer;
    },

    /** Creates a password account and mails its verification link (`mailLink` can point it elsewhere, e.g. back to an OAuth request). */
    async signup(
      input: { email: string; password: string },
      clientKey: string,
      mailLink?: MailLink,
      app?: { clientId: string },
    ) {
      await createLimiter.hit(clientKey);
      const origin: AccountOriginInput = app
        ? { via: 'consent', clientIp: clientKey, clientId: app.clientId }
        : { via: 'signup', clientIp: clientKey };
      const user = await createUser({ email: input.email, passwordHash: await hashPassword(input.password) }, origin);
      await sendVerification(user, mailLink);
      return session(user);
    },

    async login(input: { email: string; password: string }, clientKey: string) {
      const email = normalizeEmail(input.email);
      // Every attempt is counted before its password is checked, so a burst of concurrent guesses checks at
      // most `limit` of them (counting only after the slow hash let all of a burst through). A good
      // password gives its places back: only failures stay counted.
      const byAddress = await loginLimiter.hit(email);
      const byClient = await loginIpLimiter.hit(clientKey).catch(async (err: unknown) => {
        await loginLimiter.release(email, byAddress.windowStart);
        throw err;
      });
      const user = await findByEmail(email);
      const ok = await verifyPassword(input.password, user?.passwordHash ?? null);
      if (!user || !ok) throw unauthorized('Wrong email or password', 'invalid_credentials');
      await Promise.all([
        loginLimiter.release(email, byAddress.windowStart),
        loginIpLimiter.release(clientKey, byClient.windowStart),
      ]);
      return session(user);
    },

    /** Creates an account from an email address alone and returns its account key, once. */
    async provision(input: { email: string; channel?: string; ref?: string; referrer?: string }, clientKey: string) {
      await createLimiter.hit(clientKey);
      const user = await createUser(input, { via: 'provision', clientIp: clientKey });
      const apiKey = await deps.keys.getOrCreateAccountKey(user.id);
      await sendVerification(user);
      return {
        api_key: apiKey,
        user_id: user.id,
        email: user.email,
        email_verified: false as const,
        is_new: true as const,
      };
    },

    /** Mails a sign-in link; answers the same whether or not the address has an account. */
    async requestSigninLink(input: { email: string }, mailLink?: MailLink) {
      const email = normalizeEmail(input.email);
      const ttl = linkTtl(SIGNIN_TTL_MS, await mailLimiter.hit(`signin|${email}`));
      const user = await findByEmail(email);
      if (user) {
        const token = await mintOneTimeToken(user.id, 'signin', ttl);
        const link = mailLink ? mailLink(token) : `${deps.publicUrl}/auth/signin?token=${token}`;
        await deps.mailer.send({
          userId: user.id,
          to: user.email,
          subject: 'Your sign-in link',
          text: `Sign in to your account:\n\n${link}\n\nOr from an API client: POST ${deps.publicUrl}/api/auth/signin {"token":"${token}"}\n\nThe link works once and expires in ${Math.round(ttl / 60_000)} minutes.`,
        });
      }
      return { ok: true as const };
    },

    async signin(input: { token: string } & Keep) {
      const user = await consumeOneTimeToken(input.token, ['signin']);
      // Following a mailed link proves the address, as a verification link would.
      await prove(user, 'signin', input);
      return session((await getUser(user.id))!);
    },

    /** Changes the password (the current one is needed when there is one); every other session ends. */
    async changePassword(userId: string, input: { currentPassword?: string; password: string }) {
      const user = await getUser(userId);
      if (!user) throw unauthorized();
      if (user.passwordHash && !(await verifyPassword(input.currentPassword ?? '', user.passwordHash))) {
        throw unauthorized('The current password is wrong', 'invalid_credentials');
      }
      return session(await setPassword(user.id, input.password));
    },

    /** Mails a password-reset link; answers the same whether or not the address has an account. */
    async forgotPassword(input: { email: string }) {
      const email = normalizeEmail(input.email);
      const ttl = linkTtl(RESET_TTL_MS, await mailLimiter.hit(`reset|${email}`));
      const user = await findByEmail(email);
      if (user) {
        const token = await mintOneTimeToken(user.id, 'reset_password', ttl);
        await deps.mailer.send({
          userId: user.id,
          to: user.email,
          subject: 'Reset your password',
          text: `Choose a new password:\n\n${deps.publicUrl}/auth/reset?token=${token}\n\nOr from an API client: POST ${deps.publicUrl}/api/auth/password/reset {"token":"${token}","password":"…"}\n\nThe link works once and expires in ${Math.round(ttl / 60_000)} minutes. If you did not ask for it, ignore this mail.`,
        });
      }
      return { ok: true as const };
    },

    /** Sets a new password from a mailed reset token (which proves the address); every older session ends. */
    async resetPassword(input: { token: string; password: string } & Keep) {
      const user = await consumeOneTimeToken(input.token, ['reset_password']);
      await prove(user, 'reset_password', { keep: input.keep, passwordReplaced: true });
      return session(await setPassword(user.id, input.password));
    },

    /** Confirms the address with the mailed verification token (the page's button, or a script): every credential stays. */
    async verifyEmail(input: { token: string }) {
      if (!input.token) throw badRequest('token is required');
      const user = await consumeOneTimeToken(input.token, ['verify_email']);
      await markVerified(user.id);
      return { ok: true as const, email: user.email, emailVerified: true as const };
    },

    /**
     * How the account of a mailed link was made and what it holds, and (a sign-in or reset link on an
     * address never proven) the credentials following it revokes unless kept. Changes nothing (mail scanners open links).
     */
    async describeLink(input: { token: string }): Promise<LinkDetails> {
      const { purpose, user } = await peekToken(input.token);
      const credentials =
        user.emailVerified || purpose === 'verify_email'
          ? []
          : await unprovenCredentials(db, user, { passwordReplaced: purpose === 'reset_password' });
      return { purpose, credentials, ...(await accountDetails(db, user)) };
    },

    /**
     * "I did not ask for this": the owner of the address, holding a link mailed to it, deletes an account
     * that was never verified, with everything it holds. A verified account is refused (409) and keeps its link.
     */
    async disown(input: { token: string }) {
      const { user } = await peekToken(input.token);
      if (user.emailVerified)
        throw conflict('This account is verified: it can no longer be disowned from a mailed link', 'already_verified');
      const owner = await consumeOneTimeToken(input.token, ['verify_email', 'signin', 'reset_password']);
      if (!(await deps.removal.removeUnverified(owner.id)))
        throw conflict('This account was verified meanwhile; nothing was deleted', 'already_verified');
      return { ok: true as const, email: owner.email, deleted: true as const };
    },

    /** Follows a mailed link of either kind (sign-in or verification): verifies the address and signs in. */
    async redeemMailedLink(input: { token: string } & Keep) {
      const { user, purpose } = await consumeLink(input.token, ['signin', 'verify_email']);
      await prove(user, purpose, input);
      return (await getUser(user.id))!;
    },

    /** The same, answering a session (the dashboard's /app/verify and /app/signin pages). */
    async redeemLinkForSession(input: { token: string } & Keep) {
      const { user, purpose } = await consumeLink(input.token, ['signin', 'verify_email']);
      await prove(user, purpose, input);
      return session((await getUser(user.id))!);
    },

    /** Ends every session of the account (a session token cannot be revoked alone: the version all carry is bumped). */
    async signOutEverywhere(userId: string) {
      await db
        .update(schema.users)
        .set({ sessionVersion: sql`${schema.users.sessionVersion} + 1`, updatedAt: Date.now() })
        .where(eq(schema.users.id, userId));
      return { ok: true as const };
    },

    async resendVerification(userId: string) {
      const user = await getUser(userId);
      if (!user) throw unauthorized();
      if (user.emailVerified) return { ok: true as const, alreadyVerified: true };
      await mailLimiter.hit(`verify|${user.email}`);
      await sendVerification(user);
      return { ok: true as const, alreadyVerified: false };
    },
  };

  /**
   * Verifies the address. Everything the account holds stays: the key provisioning answered goes on working
   * (SPEC.md: poll GET /v1/me with it). The owner saw how the account was made and what it holds on the page
   * before confirming, and could have disowned it instead (DESIGN.md, Accounts and ownership).
   */
  async function markVerified(userId: string) {
    await db
      .update(schema.users)
      .set({ emailVerified: true, updatedAt: Date.now() })
      .where(and(eq(schema.users.id, userId), eq(schema.users.emailVerified, false)));
  }

  /** Stores a new password hash and revokes every session issued before. */
  async function setPassword(userId: string, password: string): Promise<UserRow> {
    const [row] = await db
      .update(schema.users)
      .set({
        passwordHash: await hashPassword(password),
        sessionVersion: sql`${schema.users.sessionVersion} + 1`,
        updatedAt: Date.now(),
      })
      .where(eq(schema.users.id, userId))
      .returning();
    if (!row) throw unauthorized();
    return row;
  }
}
export type AccountService = ReturnType<typeof createAccountService>;
