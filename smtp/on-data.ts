import type { Readable } from 'node:stream';
import { SpanKind } from '@opentelemetry/api';
import type { SMTPServerDataStream, SMTPServerSession } from 'smtp-server';
import { isAppError } from '../core/errors.js';
import type { Core } from '../core/index.js';
import { log, logError } from '../core/log.js';
import { inSpan } from '../core/tracing.js';
import { acceptDuration, messagesAccepted, since } from '../core/metrics.js';

type Reply = Error & { responseCode?: number };
/** Statuses core throws that are SMTP reply codes already (and no HTTP status core uses). */
const SMTP_ANSWERS = new Set([452, 552]);
const PARSE_REFUSALS = new Set(['parse_budget_exceeded', 'parse_memory_exceeded', 'unparseable_message']);
const reply = (code: number, message: string): Reply => Object.assign(new Error(message), { responseCode: code });

/**
 * Reads the DATA stream, keeping at most `maxBytes`: past the limit the rest is drained and dropped, so
 * memory per connection is bounded by the limit, not by what the client sends. Bare CR and bare LF are
 * normalized to CRLF (no line ending can smuggle a second message). Undefined when the limit was passed.
 */
async function readMessage(stream: Readable, maxBytes: number): Promise<Buffer | undefined> {
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of stream) {
    total += (chunk as Buffer).length;
    if (total <= maxBytes) chunks.push(chunk as Buffer);
    else chunks.length = 0;
  }
  if (total > maxBytes) return undefined;
  return Buffer.from(Buffer.concat(chunks).toString('latin1').replace(/\r\n|\r|\n/g, '\r\n'), 'latin1');
}

/** DATA: size check, then core stores the message (or applies a bounce/complaint report) before the 250. */
export function onData(core: Core, maxBytes: number) {
  return (stream: SMTPServerDataStream, session: SMTPServerSession, callback: (err?: Error | null, message?: string) => void) => {
    const started = performance.now();
    readMessage(stream, maxBytes).then(async (raw) => {
      if (!raw || stream.sizeExceeded) return callback(reply(552, `5.3.4 Message too big: the limit is ${maxBytes} bytes`));
      const rcpts = session.envelope.rcptTo.map((r) => r.address);
      const from = session.envelope.mailFrom ? session.envelope.mailFrom.address : '';
      const ids = await inSpan('smtp receive', { 'svc.recipients': rcpts.length, 'svc.bytes': raw.length }, () =>
        core.inbound.receive(raw, { from, rcpts, ip: session.remoteAddress, helo: session.hostNameAppearsAs || session.clientHostname || '' }), SpanKind.SERVER);
      // One per DATA answered 250 (a message to two hosted domains is stored twice, accepted once).
      messagesAccepted.inc({ source: 'smtp' });
      acceptDuration.observe({ source: 'smtp' }, since(started));
      log.info({ messageIds: ids, recipients: rcpts.length, client: session.remoteAddress }, 'inbound message accepted');
      callback(null, `2.0.0 Ok: queued${ids.length ? ` as ${ids.join(',')}` : ''}`);
    }).catch((err: unknown) => {
      // Content the parse pool gave up on (time or memory budget, or the parser refused it): the same bytes would fail again, so permanent.
      if (isAppError(err) && PARSE_REFUSALS.has(err.code)) return callback(reply(554, `5.6.0 ${err.message}`));
      // Core's SMTP answers (the storage door: 452 4.2.2 mailbox full, 552 5.2.2) go out as they are.
      if (isAppError(err) && SMTP_ANSWERS.has(err.status)) return callback(reply(err.status, err.message));
      if (isAppError(err) && err.status >= 400 && err.status < 600 && !err.retryable) return callback(reply(err.status === 413 ? 552 : 554, err.message));
      logError('[smtp] DATA failed', err);
      callback(reply(451, '4.3.0 Temporary failure storing the message, try again later'));
    });
  };
}
