import { and, eq } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { badRequest, forbidden, unauthorized, type AppError } from '../errors.js';
import { KEY_PREFIX, type KeyService } from '../keys.js';
import { domainOf, parseMailbox } from '../mail/addresses.js';
import { bareAddress } from '../mail/recipients.js';
import { patternCovers, type AppPasswordService } from '../mailboxes/app-passwords.js';
import type { LoginGuard } from '../mailboxes/login-guard.js';
import type { MailboxService } from '../mailboxes/service.js';
import { runParse, toBuffer } from '../parsing/pool.js';
import { keyPrincipal } from '../auth.js';
import { actorOf, type Actor, type MailboxScope } from '../tenancy.js';
import type { SendService } from './service.js';

/**
 * Who an SMTP session logged in as: the actor its sends run under, and for an app password the scope
 * whose addresses it may send as. The secret is kept for the session's own re-checks (a key revoked or a
 * password rotated stops the session's next message), never logged or shown.
 */
export type SubmissionLogin = { actor: Actor; scope?: MailboxScope; secret: string };

/** The envelope smtp-server collected: MAIL FROM (empty for `<>`) and the accepted RCPT TO addresses. */
export type SubmissionEnvelope = { from: string; rcpts: string[] };

const senderRefused = (address: string) =>
  forbidden(`${address} is not an address this credential may send as`, 'sender_not_allowed');

/**
 * Submission (authenticated SMTP from applications): a submitted message is a send. The login takes the
 * account key or a domain-scoped key as the password (any user name), or a mailbox's full address with an
 * app password granting `smtp`; failures count in the mailbox login guard (per client address), which refuses
 * a locked-out address. The message itself goes through `SendService.send`: the one gate, the queue.
 */
export function createSubmissionService(deps: {
  db: Db;
  keys: KeyService;
  passwords: AppPasswordService;
  mailboxes: MailboxService;
  guard: LoginGuard;
  sending: SendService;
}) {
  const { db } = deps;

  /** Whether an app password's scope covers an address (its domain, its local-part pattern). */
  const scopeCovers = (scope: MailboxScope, address: string) =>
    address.includes('@') &&
    domainOf(address) === scope.domain &&
    patternCovers(scope.pattern, address.slice(0, address.lastIndexOf('@')));

  return {
    /**
     * AUTH PLAIN or LOGIN: 429 `login_locked` while the client address is locked out, else 401 for a wrong or
     * revoked secret, counted as a failure. Unlike IMAP's guard (which counts each attempt before its check),
     * a good secret is never refused for the attempts beside it: an application opens its pool of
     * connections at once, and every secret accepted here is a random token no burst can guess.
     */
    async login(username: string, secret: string, ip: string): Promise<SubmissionLogin> {
      await deps.guard.check(ip);
      const refuse = async (err: AppError) => {
        await deps.guard.fail(ip);
        throw err;
      };
      if (secret.startsWith(KEY_PREFIX)) {
        const principal = await keyPrincipal(deps.keys, secret);
        if (!principal) return refuse(unauthorized('Invalid or revoked API key', 'invalid_key'));
        return { actor: actorOf(principal), secret };
      }
      if (secret.startsWith('svc_pw_') || secret.startsWith('svc_imap_')) {
        const scope = await deps.passwords.verify(secret);
        if (!scope) return refuse(unauthorized('Invalid or revoked app password', 'invalid_app_password'));
        if (!scope.protocols.includes('smtp'))
          return refuse(unauthorized('This app password does not grant smtp', 'protocol_not_granted'));
        const address = username.trim().toLowerCase();
        if (!address.includes('@') || !(await deps.mailboxes.resolve(scope, address)))
          return refuse(unauthorized('This app password does not open that address', 'address_not_covered'));
        return { actor: { userId: scope.userId }, scope, secret };
      }
      return refuse(unauthorized('The password is not an API key or an app password', 'invalid_credentials'));
    },

    /**
     * MAIL FROM: the session's credential still stands (a revoked key or rotated password stops its next
     * message), and a non-empty envelope sender is on a domain it may send from (for an app password, an
     * address its pattern covers).
     */
    async sender(login: SubmissionLogin, address: string): Promise<void> {
      if (login.scope) {
        const scope = await deps.passwords.verify(login.secret);
        if (!scope || scope.passwordId !== login.scope.passwordId || !scope.protocols.includes('smtp'))
          throw unauthorized('This app password was revoked or rotated', 'credential_revoked');
        if (address && !scopeCovers(scope, address.toLowerCase())) throw senderRefused(address);
        login.scope = scope;
        return;
      }
      const row = await deps.keys.lookup(login.secret);
      if (!row) throw unauthorized('This API key was revoked or rotated', 'credential_revoked');
      if (!address) return;
      const d = schema.domains;
      const [domain] = await db
        .select({ id: d.id })
        .from(d)
        .where(and(eq(d.userId, login.actor.userId), eq(d.domain, domainOf(address))));
      if (!domain || (login.actor.domainId && login.actor.domainId !== domain.id)) throw senderRefused(address);
    },

    /** RCPT TO: a recipient the account suppressed is refused here, so the rest of the message can go. */
    async recipient(login: SubmissionLogin, address: string): Promise<void> {
      const email = bareAddress(address);
      const s = schema.suppressions;
      const [row] = await db
        .select({ reason: s.reason })
        .from(s)
        .where(and(eq(s.userId, login.actor.userId), eq(s.email, email)));
      if (row)
        throw forbidden(`${email} is on this account's suppression list (${row.reason})`, 'recipient_suppressed');
    },

    /**
     * DATA: the message read in the parse pool, its From checked against an app password's addresses, then
     * sent as `/v1/send` sends (the gate, the caps, the commit before the answer, the queue).
     */
    async submit(login: SubmissionLogin, raw: Buffer, envelope: SubmissionEnvelope) {
      if (envelope.rcpts.length === 0) throw badRequest('No recipients', 'validation_error');
      const m = await runParse('readSubmission', { raw, from: envelope.from, rcpts: envelope.rcpts });
      const from = parseMailbox(m.from, 'From');
      if (login.scope && !scopeCovers(login.scope, from.address)) throw senderRefused(from.address);
      return deps.sending.send(
        login.actor,
        {
          from: m.from,
          to: m.to,
          cc: m.cc,
          bcc: m.bcc,
          subject: m.subject,
          html: m.html,
          text: m.text,
          replyTo: m.replyTo,
          inReplyTo: m.inReplyTo,
          headers: m.headers,
          metadata: m.metadata,
          templateId: m.templateId,
          templateData: m.templateData,
          scheduledAt: m.scheduledAt,
          trackOpens: m.trackOpens,
          trackClicks: m.trackClicks,
          attachments: m.attachments.map((a) => ({
            filename: a.filename,
            contentType: a.contentType,
            content: toBuffer(a.content).toString('base64'),
            ...(a.cid ? { cid: a.cid } : {}),
          })),
        },
        'submission',
      );
    },
  };
}
export type SubmissionService = ReturnType<typeof createSubmissionService>;
