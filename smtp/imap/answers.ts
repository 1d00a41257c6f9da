import { isAppError } from '../../core/errors.js';
import { ParseError } from './parser.js';

/** Status responses a handler throws to end its command: `NO` or `BAD`, with an optional response code. */
export class ImapReply extends Error {
  constructor(
    readonly status: 'NO' | 'BAD',
    message: string,
    readonly code?: string,
  ) {
    super(message);
  }
}
export const no = (message: string, code?: string) => new ImapReply('NO', message, code);
export const bad = (message: string, code?: string) => new ImapReply('BAD', message, code);

/** A tagged status answer that ends a command: NO or BAD, an optional response code (RFC 5530), and text. */
export type ImapAnswer = { status: 'NO' | 'BAD'; code?: string; text: string };

/** The answer to a fault (not a refusal anything here accounts for): the caller logs the error. */
export const SERVER_BUG: ImapAnswer = { status: 'NO', code: 'SERVERBUG', text: 'Internal error, try again' };

const LOGIN_COMMANDS = new Set(['LOGIN', 'AUTHENTICATE']);

/** A refused login (RFC 5530): locked out for failing too often, a password that may not do this, or bad credentials. */
function loginAnswer(err: { status: number; message: string }): ImapAnswer {
  const locked = 'Too many failed logins from this address; try again later';
  if (err.status === 429) return { status: 'NO', code: 'UNAVAILABLE', text: locked };
  if (err.status === 403) return { status: 'NO', code: 'AUTHORIZATIONFAILED', text: err.message };
  return { status: 'NO', code: 'AUTHENTICATIONFAILED', text: 'Invalid credentials' };
}

/**
 * The one place an error becomes the tagged answer of IMAP command `command`: a handler's own NO or BAD as
 * it is, a command that does not parse BAD, core's refusal of a login (LOGIN, AUTHENTICATE) by its status,
 * a write past the storage quota `NO [OVERQUOTA]` (RFC 9208 §4.3), anything else SERVER_BUG.
 */
export function imapAnswerOf(err: unknown, command: string): ImapAnswer {
  if (err instanceof ImapReply) return { status: err.status, code: err.code, text: err.message };
  if (err instanceof ParseError) return { status: 'BAD', text: err.message };
  if (!isAppError(err)) return SERVER_BUG;
  if (LOGIN_COMMANDS.has(command)) return loginAnswer(err);
  if (err.code === 'storage_quota_exceeded') return { status: 'NO', code: 'OVERQUOTA', text: err.message };
  return SERVER_BUG;
}

/** The line of a tagged answer: `<tag> NO [CODE] text`. */
export const answerLine = (tag: string, a: ImapAnswer): string =>
  `${tag} ${a.status} ${a.code ? `[${a.code}] ` : ''}${a.text}`;
