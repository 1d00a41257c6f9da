import { z } from 'zod';
import { defineOperation, emailField, type OpContext } from '../contract.js';

const user = z.object({
  id: z.string().describe('Account id, usr_…'),
  email: z.string(),
  emailVerified: z.boolean(),
  plan: z.string(),
  createdAt: z.number().int().describe('ms epoch'),
});
const session = z.object({
  token: z.string().describe('Session token: send as "Authorization: Bearer <token>"'),
  user,
});
const password = z.string().min(8, 'must be at least 8 characters').max(200);
/** On an address never proven, a sign-in or reset link revokes every credential made before, except these. */
const keep = z
  .array(z.string().min(1).max(100))
  .max(500)
  .optional()
  .describe('Unverified account: ids from GET /api/auth/link `credentials` to keep; every other one is revoked');
/** Where a mailed link opens: by default the API's own page; `app` = the dashboard (/app/verify, /app/signin). */
const linkTo = z
  .enum(['api', 'app'])
  .optional()
  .describe('app: the mailed link opens the dashboard at /app instead of the API page');
const appLink = (core: OpContext['core'], page: 'verify' | 'signin', to: 'api' | 'app' | undefined) =>
  to === 'app' ? (token: string) => `${core.config.publicUrl}/app/${page}?token=${token}` : undefined;

/** Drops a value that does not pass `schema` instead of failing the request (provision's channel, referrer). */
const dropInvalid = <T extends z.ZodType>(schema: T) =>
  z
    .unknown()
    .transform((v) => {
      const r = schema.safeParse(v);
      return r.success ? (r.data as z.output<T>) : undefined;
    })
    .optional();

export const provision = defineOperation({
  name: 'account.provision',
  method: 'POST',
  path: '/api/v1/provision',
  auth: 'public',
  status: 200,
  summary: 'Create an account from an email address alone; returns its account key once and mails a verification link.',
  body: z.strictObject({
    email: emailField,
    channel: dropInvalid(z.string().regex(/^[a-z0-9][a-z0-9_-]{0,63}$/)).describe(
      'Distribution-channel slug; invalid values are dropped',
    ),
    ref: dropInvalid(z.string().min(1).max(128)).describe('Referral code'),
    referrer: dropInvalid(z.url({ protocol: /^https?$/ }).max(2048)).describe(
      'Landing referrer URL; invalid values are dropped',
    ),
  }),
  output: z.object({
    api_key: z.string().describe('The account key (svc_live_…); returned only here'),
    user_id: z.string(),
    email: z.string(),
    email_verified: z.literal(false),
    is_new: z.literal(true),
  }),
  handler: (input, { core, clientIp }) => core.accounts.provision(input, clientIp),
});

export const signup = defineOperation({
  name: 'auth.signup',
  method: 'POST',
  path: '/api/auth/signup',
  auth: 'public',
  status: 201,
  summary: 'Create an account with a password; mails a verification link and answers a session.',
  body: z.strictObject({ email: emailField, password, linkTo }),
  output: session,
  handler: ({ linkTo: to, ...input }, { core, clientIp }) =>
    core.accounts.signup(input, clientIp, appLink(core, 'verify', to)),
});

export const login = defineOperation({
  name: 'auth.login',
  method: 'POST',
  path: '/api/auth/login',
  auth: 'public',
  summary: 'Sign in with email and password.',
  body: z.strictObject({ email: emailField, password: z.string().min(1).max(200) }),
  output: session,
  handler: (input, { core, clientIp }) => core.accounts.login(input, clientIp),
});

export const signinLink = defineOperation({
  name: 'auth.signinLink',
  method: 'POST',
  path: '/api/auth/signin-link',
  auth: 'public',
  summary: 'Mail a one-time sign-in link (answers ok whether or not the address has an account).',
  body: z.strictObject({ email: emailField, linkTo }),
  output: z.object({ ok: z.literal(true) }),
  handler: ({ linkTo: to, ...input }, { core }) => core.accounts.requestSigninLink(input, appLink(core, 'signin', to)),
});

export const signin = defineOperation({
  name: 'auth.signin',
  method: 'POST',
  path: '/api/auth/signin',
  auth: 'public',
  summary:
    'Exchange a mailed sign-in token for a session. On an unverified account it verifies the address and revokes every credential made before, except those in keep.',
  body: z.strictObject({ token: z.string().min(1).max(200), keep }),
  output: session,
  handler: (input, { core }) => core.accounts.signin(input),
});

export const redeemLink = defineOperation({
  name: 'auth.redeemLink',
  method: 'POST',
  path: '/api/auth/link',
  auth: 'public',
  summary:
    'Exchange a mailed sign-in or verification token for a session (a verification token verifies the address first and keeps every credential; a sign-in token on an unverified account revokes those not in keep).',
  body: z.strictObject({ token: z.string().min(1).max(200), keep }),
  output: session,
  handler: (input, { core }) => core.accounts.redeemLinkForSession(input),
});

export const signOut = defineOperation({
  name: 'auth.signout',
  method: 'POST',
  path: '/api/auth/signout',
  auth: ['session'],
  summary: 'Sign out: ends every session of the account (session tokens carry one version, which this bumps).',
  body: z.strictObject({}),
  output: z.object({ ok: z.literal(true) }),
  handler: (_input, { core, actor }) => core.accounts.signOutEverywhere(actor.userId),
});

export const verifyEmail = defineOperation({
  name: 'auth.verify',
  method: 'POST',
  path: '/api/auth/verify',
  auth: 'public',
  summary:
    "Confirm the address with the mailed verification token (what the page's button does): marks it verified; every key, password and session of the account keeps working.",
  body: z.strictObject({ token: z.string({ message: 'token is required' }).min(1).max(200) }),
  output: z.object({ ok: z.literal(true), email: z.string(), emailVerified: z.literal(true) }),
  handler: (input, { core }) => core.accounts.verifyEmail(input),
});

const named = z.object({ name: z.string().nullable(), domain: z.string().nullable() });
export const linkDetails = defineOperation({
  name: 'auth.linkDetails',
  method: 'GET',
  path: '/api/auth/link',
  auth: 'public',
  summary:
    'What a mailed link (verification, sign-in or reset token) leads to: how the account was made and what it holds. Changes nothing.',
  query: z.object({ token: z.string({ message: 'token is required' }).min(1).max(200) }),
  output: z.object({
    purpose: z.enum(['verify_email', 'signin', 'reset_password']),
    email: z.string(),
    emailVerified: z.boolean(),
    origin: z.object({
      via: z
        .enum(['provision', 'signup', 'consent'])
        .nullable()
        .describe(
          "provision: POST /api/v1/provision; signup: password sign-up; consent: signed up on an app's consent page",
        ),
      channel: z.string().nullable(),
      app: z.object({ clientId: z.string(), name: z.string().nullable() }).nullable(),
      createdAt: z.number().int().describe('ms epoch'),
      clientIp: z.string().nullable().describe('The client address that made the account'),
    }),
    holdings: z.object({
      accountKey: z.boolean(),
      password: z.boolean(),
      scopedKeys: z.array(named),
      appPasswords: z.array(z.object({ label: z.string(), domain: z.string().nullable(), address: z.string() })),
      routes: z.array(
        z.object({
          domain: z.string().nullable(),
          pattern: z.string(),
          action: z.string(),
          destination: z.string().nullable(),
        }),
      ),
      linkedApps: z.array(z.object({ name: z.string().nullable(), since: z.number().int() })),
      domains: z.array(z.object({ domain: z.string(), status: z.string() })),
    }),
    credentials: z
      .array(
        z.object({
          id: z.string(),
          kind: z.enum(['account_key', 'scoped_key', 'app_password', 'linked_app', 'password', 'sessions']),
          label: z.string(),
        }),
      )
      .optional()
      // Always present; optional in the schema because the published schemas only grow (a new required field breaks it).
      .describe(
        'A sign-in or reset link on an unverified account: what following it revokes, unless its id is sent in keep (empty otherwise)',
      ),
  }),
  handler: (input, { core }) => core.accounts.describeLink(input),
});

export const disown = defineOperation({
  name: 'auth.disown',
  method: 'POST',
  path: '/api/auth/disown',
  auth: 'public',
  summary:
    '"I did not ask for this": with a token mailed to the address, delete the unverified account and everything it holds (409 already_verified once verified).',
  body: z.strictObject({ token: z.string({ message: 'token is required' }).min(1).max(200) }),
  output: z.object({ ok: z.literal(true), email: z.string(), deleted: z.literal(true) }),
  handler: (input, { core }) => core.accounts.disown(input),
});

export const resendVerification = defineOperation({
  name: 'auth.resendVerification',
  method: 'POST',
  path: '/api/auth/verify/resend',
  auth: ['session', 'oauth', 'account_key'],
  summary: 'Mail a fresh verification link to the account address.',
  body: z.strictObject({}),
  output: z.object({ ok: z.literal(true), alreadyVerified: z.boolean() }),
  handler: (_input, { core, actor }) => core.accounts.resendVerification(actor.userId),
});

export const changePassword = defineOperation({
  name: 'auth.changePassword',
  method: 'POST',
  path: '/api/auth/password',
  auth: ['session'],
  summary:
    'Change the password (currentPassword needed when one is set); every other session is signed out, a new one is answered.',
  body: z.strictObject({ currentPassword: z.string().max(200).optional(), password }),
  output: session,
  handler: (input, { core, actor }) => core.accounts.changePassword(actor.userId, input),
});

export const forgotPassword = defineOperation({
  name: 'auth.forgotPassword',
  method: 'POST',
  path: '/api/auth/password/forgot',
  auth: 'public',
  summary: 'Mail a one-time password-reset link (answers ok whether or not the address has an account).',
  body: z.strictObject({ email: emailField }),
  output: z.object({ ok: z.literal(true) }),
  handler: (input, { core }) => core.accounts.forgotPassword(input),
});

export const resetPassword = defineOperation({
  name: 'auth.resetPassword',
  method: 'POST',
  path: '/api/auth/password/reset',
  auth: 'public',
  summary:
    'Set a new password with a mailed reset token; every older session is signed out, a new one is answered. On an unverified account it verifies the address and revokes every credential made before, except those in keep.',
  body: z.strictObject({ token: z.string().min(1).max(200), password, keep }),
  output: session,
  handler: (input, { core }) => core.accounts.resetPassword(input),
});
