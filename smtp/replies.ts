import { isAppError } from '../core/errors.js';

/** An SMTP answer: the reply code (RFC 5321), its enhanced status code (RFC 3463) and the text after both. */
export type SmtpReply = { code: number; enhanced: string; message: string };

/** Where in the session an answer is given: the greeting, any command, AUTH, MAIL FROM, RCPT TO, or the end of DATA. */
export type SmtpPhase = 'connect' | 'command' | 'auth' | 'mail' | 'rcpt' | 'data';

type Answer = readonly [code: number, enhanced: string];

/**
 * The error codes with an answer of their own, for a temporary (`retryable`) refusal and a permanent one.
 * A side left out falls to the default of its kind (see `smtpReplyOf`).
 */
const ANSWERS: Record<string, { temporary?: Answer; permanent?: Answer }> = {
  /**
   * The storage door. Temporary: 452 4.2.2 (RFC 5321 §4.2.2, RFC 3463 X.2.2 "mailbox full"), so the sending
   * MTA keeps the message and tries again once the owner made room (or the next day for the daily allowance
   * of an unverified account). Permanent: 552 5.2.2, the message is larger than everything the account may
   * ever hold, so retrying cannot help.
   */
  mailbox_full: { temporary: [452, '4.2.2'], permanent: [552, '5.2.2'] },
  /** RCPT for a domain known here whose last DNS check could not read its records: try later. */
  dns_unavailable: { temporary: [451, '4.4.3'] },
  /** RCPT for a domain that is not a verified receiving domain here. */
  unknown_domain: { permanent: [550, '5.1.2'] },
  /** RCPT for an SRS return address (a forward's envelope sender) whose hash is wrong or that is too old: no such mailbox. */
  srs_invalid: { permanent: [550, '5.1.1'] },
  /** Content the parse pool gave up on (time or memory budget) or the parser refused: the same bytes would fail again. */
  parse_budget_exceeded: { permanent: [554, '5.6.0'] },
  parse_memory_exceeded: { permanent: [554, '5.6.0'] },
  unparseable_message: { permanent: [554, '5.6.0'] },
  /**
   * The receiving domain's inbound policy (docs/inbound-policy.md): a sender its rules block, at RCPT (and at
   * DATA by the header From); spam at or above its refusal score, or a DMARC fail of a `p=reject` sender, at
   * the end of DATA. 550 5.7.1 "delivery not authorized, message refused": the sending server keeps the bounce.
   */
  sender_blocked: { permanent: [550, '5.7.1'] },
  policy_refused: { permanent: [550, '5.7.1'] },
  /** DATA past the server's size limit (the rest of the stream was drained, never kept). */
  message_too_large: { permanent: [552, '5.3.4'] },
  /** The connection guard: too many sessions from one client, or too many commands a minute (then disconnected). */
  smtp_connections: { temporary: [421, '4.7.0'] },
  smtp_commands: { temporary: [421, '4.7.0'] },
  /** RCPT past SMTP_MAX_RECIPIENTS on the submission server (RFC 3463 X.5.3, "too many recipients"). */
  too_many_recipients: { temporary: [452, '4.5.3'] },

  /**
   * Submission (smtp/submission.ts). AUTH with a wrong, revoked or out-of-scope secret: 535 5.7.8 (RFC 4954
   * "authentication credentials invalid"); locked out by the login guard: 454 4.7.0 (temporary failure).
   */
  invalid_key: { permanent: [535, '5.7.8'] },
  invalid_app_password: { permanent: [535, '5.7.8'] },
  invalid_credentials: { permanent: [535, '5.7.8'] },
  address_not_covered: { permanent: [535, '5.7.8'] },
  protocol_not_granted: { permanent: [535, '5.7.8'] },
  login_locked: { temporary: [454, '4.7.0'] },
  /** The session's key was revoked or its password rotated after AUTH: authenticate again (RFC 4954 530 5.7.0). */
  credential_revoked: { permanent: [530, '5.7.0'] },
  /** The gate: not a sender this credential may use, an account that may not send, a suppressed recipient (5.7.1 "not authorized"). */
  sender_not_allowed: { permanent: [550, '5.7.1'] },
  domain_not_verified: { permanent: [550, '5.7.1'] },
  email_not_verified: { permanent: [550, '5.7.1'] },
  account_suspended: { permanent: [550, '5.7.1'] },
  recipient_suppressed: { permanent: [550, '5.7.1'] },
  /**
   * The plan's caps: 451 4.7.1 with the reason, so the sending application keeps the message and tries again
   * (the daily cap turns at midnight UTC; the monthly bucket when the month turns or the plan grows).
   */
  daily_limit: { temporary: [451, '4.7.1'], permanent: [451, '4.7.1'] },
  monthly_quota_exceeded: { temporary: [451, '4.7.1'], permanent: [451, '4.7.1'] },
};

/** What a failure no answer accounts for says, by phase: try again later. */
const TEMPORARY: Record<SmtpPhase, SmtpReply> = {
  connect: { code: 421, enhanced: '4.3.0', message: 'Temporary failure, try again later' },
  command: { code: 451, enhanced: '4.3.0', message: 'Temporary failure, try again later' },
  auth: { code: 454, enhanced: '4.7.0', message: 'Temporary authentication failure' },
  mail: { code: 451, enhanced: '4.3.0', message: 'Temporary failure, try again later' },
  rcpt: { code: 451, enhanced: '4.3.0', message: 'Temporary failure, try again later' },
  data: { code: 451, enhanced: '4.3.0', message: 'Temporary failure storing the message, try again later' },
};

/** A permanent refusal without an answer of its own: 535 at AUTH, 550 at MAIL and RCPT, 552 5.3.4 for a 413 at DATA, 554 otherwise. */
function permanentDefault(status: number, phase: SmtpPhase): Answer {
  if (phase === 'auth') return [535, '5.7.8'];
  if (phase === 'mail' || phase === 'rcpt') return [550, '5.0.0'];
  if (phase === 'data' && status === 413) return [552, '5.3.4'];
  return [554, '5.0.0'];
}

/**
 * The SMTP answer to anything core (or this edge) throws, the one place an error becomes a reply code. An
 * AppError's `code` picks its answer from the table, on the side its `retryable` says; one without an entry
 * is a permanent refusal with its own message when not retryable, else a temporary failure. Anything else
 * (a fault) is a temporary failure whose text says nothing of it.
 */
export function smtpReplyOf(err: unknown, phase: SmtpPhase): SmtpReply {
  if (!isAppError(err)) return TEMPORARY[phase];
  const own = ANSWERS[err.code]?.[err.retryable ? 'temporary' : 'permanent'];
  if (own) return { code: own[0], enhanced: own[1], message: err.message };
  if (err.retryable) return TEMPORARY[phase];
  const [code, enhanced] = permanentDefault(err.status, phase);
  return { code, enhanced, message: err.message };
}

/** True for a failure no answer accounts for (not an AppError, or a retryable one without its own answer): worth a log line. */
export function isFault(err: unknown): boolean {
  return !isAppError(err) || (err.retryable && !ANSWERS[err.code]?.temporary);
}

/** The text after the reply code, as smtp-server writes it: the enhanced status code, then the message. */
export const replyText = (r: SmtpReply): string => `${r.enhanced} ${r.message}`;

/** The error an smtp-server callback hands back: smtp-server answers `responseCode` and the message. */
export function smtpError(err: unknown, phase: SmtpPhase): Error & { responseCode: number } {
  const r = smtpReplyOf(err, phase);
  return Object.assign(new Error(replyText(r)), { responseCode: r.code });
}
