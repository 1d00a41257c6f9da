import { describe, expect, it } from 'vitest';
import { AppError } from '../core/errors.js';
import { isFault, smtpError, smtpReplyOf, type SmtpPhase } from '../smtp/replies.js';

/** What smtp-server writes for a callback's error: the reply code, then the error's message. */
const line = (err: unknown, phase: SmtpPhase) => {
  const e = smtpError(err, phase);
  return `${e.responseCode} ${e.message}`;
};
const addr = '<hello@fresh.send.svc.test>';

describe('smtpReplyOf: core error codes to SMTP answers, byte for byte what the server answered before', () => {
  it('the storage door: mailbox_full is 452 4.2.2 while retrying may help, 552 5.2.2 when it never fits', () => {
    const full = new AppError(
      507,
      'mailbox_full',
      `${addr}: mailbox full (storage quota of 5 bytes reached), try again later`,
      true,
    );
    const never = new AppError(
      413,
      'mailbox_full',
      `${addr}: the message is larger than this mailbox's storage quota (5 bytes)`,
    );
    for (const phase of ['rcpt', 'data'] as const) {
      expect(smtpReplyOf(full, phase)).toEqual({ code: 452, enhanced: '4.2.2', message: full.message });
      expect(line(full, phase)).toBe(`452 4.2.2 ${full.message}`);
      expect(line(never, phase)).toBe(`552 5.2.2 ${never.message}`);
    }
  });

  it('RCPT: dns_unavailable is 451 4.4.3, unknown_domain 550 5.1.2', () => {
    const dns = new AppError(
      503,
      'dns_unavailable',
      `${addr}: cannot check fresh.send.svc.test right now, try again later`,
      true,
    );
    const unknown = new AppError(404, 'unknown_domain', `${addr}: unknown.example is not a verified domain here`);
    expect(line(dns, 'rcpt')).toBe(`451 4.4.3 ${dns.message}`);
    expect(line(unknown, 'rcpt')).toBe(`550 5.1.2 ${unknown.message}`);
  });

  it('DATA: what the parse pool refuses for good is 554 5.6.0 with its message', () => {
    for (const code of ['parse_budget_exceeded', 'parse_memory_exceeded', 'unparseable_message']) {
      const err = new AppError(422, code, 'The message could not be parsed: too deep');
      expect(line(err, 'data')).toBe('554 5.6.0 The message could not be parsed: too deep');
    }
  });

  it('DATA past the size limit is 552 5.3.4', () => {
    const err = new AppError(413, 'message_too_large', 'Message too big: the limit is 262144 bytes');
    expect(line(err, 'data')).toBe('552 5.3.4 Message too big: the limit is 262144 bytes');
  });

  it('the connection guard: too many connections or commands is 421 4.7.0', () => {
    const conns = new AppError(429, 'smtp_connections', 'Too many connections from 10.0.0.1, try again later', true);
    const cmds = new AppError(429, 'smtp_commands', 'Too many commands, slow down', true);
    expect(line(conns, 'connect')).toBe('421 4.7.0 Too many connections from 10.0.0.1, try again later');
    expect(smtpReplyOf(cmds, 'command')).toEqual({
      code: 421,
      enhanced: '4.7.0',
      message: 'Too many commands, slow down',
    });
  });

  it('a fault, or a retryable error without an answer of its own (parse_busy), is 451 4.3.0 and says nothing of it', () => {
    const busy = new AppError(
      503,
      'parse_busy',
      'Every processing thread stayed busy for 5000 ms (parseMail); try again later',
      true,
    );
    for (const err of [new Error('connection terminated'), busy, 'a string']) {
      expect(line(err, 'data')).toBe('451 4.3.0 Temporary failure storing the message, try again later');
      expect(line(err, 'rcpt')).toBe('451 4.3.0 Temporary failure, try again later');
      expect(isFault(err)).toBe(true);
    }
    expect(line(busy, 'connect')).toBe('421 4.3.0 Temporary failure, try again later');
  });

  it('a permanent error without an answer of its own keeps its message: 554 at DATA (552 5.3.4 for a 413), 550 at RCPT', () => {
    const notFound = new AppError(404, 'not_found', 'Domain not found');
    const tooLarge = new AppError(413, 'attachment_too_large', 'Attachment too large');
    expect(line(notFound, 'data')).toBe('554 5.0.0 Domain not found');
    expect(line(tooLarge, 'data')).toBe('552 5.3.4 Attachment too large');
    expect(line(notFound, 'rcpt')).toBe('550 5.0.0 Domain not found');
    expect(isFault(notFound)).toBe(false);
  });

  it('an answered refusal is not a fault; a code whose answer is permanent only is a fault when retryable', () => {
    expect(isFault(new AppError(507, 'mailbox_full', 'full', true))).toBe(false);
    expect(isFault(new AppError(404, 'unknown_domain', 'unknown'))).toBe(false);
    expect(isFault(new AppError(503, 'unknown_domain', 'odd', true))).toBe(true);
    expect(line(new AppError(503, 'unknown_domain', 'odd', true), 'rcpt')).toBe(
      '451 4.3.0 Temporary failure, try again later',
    );
  });
});
