import { describe, expect, it } from 'vitest';
import { AppError, tooMany } from '../core/errors.js';
import { answerLine, bad, imapAnswerOf, no, SERVER_BUG } from '../smtp/imap/answers.js';
import { ParseError } from '../smtp/imap/parser.js';

const line = (err: unknown, command: string) => answerLine('a1', imapAnswerOf(err, command));

describe('imapAnswerOf: errors to tagged IMAP answers', () => {
  it("a handler's NO or BAD goes out as it is, with its response code", () => {
    expect(line(no('The mailbox is open read-only (EXAMINE)', 'READ-ONLY'), 'STORE')).toBe(
      'a1 NO [READ-ONLY] The mailbox is open read-only (EXAMINE)',
    );
    expect(line(bad('SEARCH needs search keys'), 'SEARCH')).toBe('a1 BAD SEARCH needs search keys');
    expect(line(new ParseError('Unbalanced parenthesis', 'a1'), 'FETCH')).toBe('a1 BAD Unbalanced parenthesis');
  });

  it('a refused login: locked out is UNAVAILABLE, a password that may not is AUTHORIZATIONFAILED, else AUTHENTICATIONFAILED', () => {
    const locked = tooMany('Too many failed logins from this address; try again later', 'login_locked', 30);
    const notGranted = new AppError(403, 'protocol_not_granted', 'This app password does not grant imap');
    const wrong = new AppError(401, 'unauthorized', 'Missing or invalid credentials');
    for (const command of ['LOGIN', 'AUTHENTICATE']) {
      expect(line(locked, command)).toBe(
        'a1 NO [UNAVAILABLE] Too many failed logins from this address; try again later',
      );
      expect(line(notGranted, command)).toBe('a1 NO [AUTHORIZATIONFAILED] This app password does not grant imap');
      expect(line(wrong, command)).toBe('a1 NO [AUTHENTICATIONFAILED] Invalid credentials');
    }
  });

  it('a write past the storage quota is NO [OVERQUOTA] with its message', () => {
    const over = new AppError(413, 'storage_quota_exceeded', 'Storage quota exceeded: 10 of 10 bytes are in use');
    expect(line(over, 'APPEND')).toBe('a1 NO [OVERQUOTA] Storage quota exceeded: 10 of 10 bytes are in use');
    expect(line(over, 'UID')).toBe('a1 NO [OVERQUOTA] Storage quota exceeded: 10 of 10 bytes are in use');
  });

  it('anything else, a fault or another refusal outside a login, is NO [SERVERBUG]', () => {
    expect(imapAnswerOf(new Error('connection terminated'), 'LOGIN')).toBe(SERVER_BUG);
    expect(imapAnswerOf(new AppError(404, 'not_found', 'Not found'), 'SELECT')).toBe(SERVER_BUG);
    expect(line(new Error('boom'), 'FETCH')).toBe('a1 NO [SERVERBUG] Internal error, try again');
  });
});
