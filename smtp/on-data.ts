import type { Readable } from 'node:stream';
import { SpanKind } from '@opentelemetry/api';
import type { SMTPServerDataStream, SMTPServerSession } from 'smtp-server';
import { AppError } from '../core/errors.js';
import type { Core } from '../core/index.js';
import { log, logError } from '../core/log.js';
import { inSpan } from '../core/tracing.js';
import { acceptDuration, messagesAccepted, since } from '../core/metrics.js';
import { isFault, smtpError } from './replies.js';

/** DATA past the size limit: the rest of the stream was drained and dropped. */
const tooBig = (maxBytes: number) =>
  new AppError(413, 'message_too_large', `Message too big: the limit is ${maxBytes} bytes`);

/**
 * Reads the DATA stream, keeping at most `maxBytes`: past the limit the rest is drained and dropped, so
 * memory per connection is bounded by the limit, not by what the client sends. Bare CR and bare LF are
 * normalized to CRLF (no line ending can smuggle a second message). Undefined when the limit was passed.
 */
export async function readMessage(stream: Readable, maxBytes: number): Promise<Buffer | undefined> {
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of stream) {
    total += (chunk as Buffer).length;
    if (total <= maxBytes) chunks.push(chunk as Buffer);
    else chunks.length = 0;
  }
  if (total > maxBytes) return undefined;
  return Buffer.from(
    Buffer.concat(chunks)
      .toString('latin1')
      .replace(/\r\n|\r|\n/g, '\r\n'),
    'latin1',
  );
}

/** DATA: size check, then core stores the message (or applies a bounce/complaint report) before the 250. */
export function onData(core: Pick<Core, 'inbound'>, maxBytes: number) {
  return (
    stream: SMTPServerDataStream,
    session: SMTPServerSession,
    callback: (err?: Error | null, message?: string) => void,
  ) => {
    const started = performance.now();
    readMessage(stream, maxBytes)
      .then(async (raw) => {
        if (!raw || stream.sizeExceeded) return callback(smtpError(tooBig(maxBytes), 'data'));
        const rcpts = session.envelope.rcptTo.map((r) => r.address);
        const from = session.envelope.mailFrom ? session.envelope.mailFrom.address : '';
        const ids = await inSpan(
          'smtp receive',
          { 'svc.recipients': rcpts.length, 'svc.bytes': raw.length },
          () =>
            core.inbound.receive(raw, {
              from,
              rcpts,
              ip: session.remoteAddress,
              helo: session.hostNameAppearsAs || session.clientHostname || '',
              // The client's reverse DNS name (smtp-server writes `[ip]` when it has none).
              ...(session.clientHostname && !session.clientHostname.startsWith('[')
                ? { hostname: session.clientHostname }
                : {}),
            }),
          SpanKind.SERVER,
        );
        // One per DATA answered 250 (a message to two hosted domains is stored twice, accepted once).
        messagesAccepted.inc({ source: 'smtp' });
        acceptDuration.observe({ source: 'smtp' }, since(started));
        log.info(
          { messageIds: ids, recipients: rcpts.length, client: session.remoteAddress },
          'inbound message accepted',
        );
        callback(null, `2.0.0 Ok: queued${ids.length ? ` as ${ids.join(',')}` : ''}`);
      })
      .catch((err: unknown) => {
        // Core's refusals (the storage door, the parse pool's) and faults alike: smtp/replies.ts answers them.
        if (isFault(err)) logError('[smtp] DATA failed', err);
        callback(smtpError(err, 'data'));
      });
  };
}
