import { Agent as HttpAgent, request as httpRequest } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';

/** The symbols a verdict keeps: the strongest first (by absolute score), then by name. */
export const TOP_SYMBOLS = 15;
/** rspamd's answer is a few kilobytes; anything past this is not read. */
const MAX_ANSWER_BYTES = 256 * 1024;
/** Larger messages are not sent to rspamd (its own default limit is 50 MiB); they are delivered unscored. */
export const MAX_SCAN_BYTES = 32 * 1024 * 1024;

/**
 * rspamd's verdict on one inbound message (docs/spam-scoring.md): its score, the score its `reject` action
 * starts at (`required`), the action it chose (`no action`, `greylist`, `add header`, `rewrite subject`,
 * `soft reject`, `reject`) and the strongest symbols that fired. Unscored: why (`not_configured`, `timeout`,
 * `unreachable`, `bad_answer`, `too_large`); the message is delivered all the same.
 */
export type SpamVerdict =
  | {
      scored: true;
      score: number;
      required: number;
      action: string;
      symbols: { name: string; score: number }[];
    }
  | { scored: false; reason: string };

/** What rspamd is told about the SMTP transaction (its HTTP protocol headers). */
export type SpamMeta = { ip: string; from: string; rcpts: string[]; helo: string; hostname?: string };

export type SpamFilter = { check(raw: Buffer, meta: SpamMeta): Promise<SpamVerdict> };

const round = (n: number) => Math.round(n * 100) / 100;
/** Header values from the SMTP session: printable ASCII only, bounded (node refuses CR, LF and NUL anyway). */
const headerValue = (s: string) => {
  let out = '';
  for (const ch of s.slice(0, 512)) {
    const c = ch.charCodeAt(0);
    if (c >= 0x20 && c < 0x7f) out += ch;
  }
  return out;
};

/** Reads rspamd's `/checkv2` JSON into a verdict; anything unexpected is `bad_answer`. */
export function verdictOf(answer: unknown): SpamVerdict {
  if (!answer || typeof answer !== 'object') return { scored: false, reason: 'bad_answer' };
  const a = answer as Record<string, unknown>;
  if (typeof a.score !== 'number' || typeof a.action !== 'string') return { scored: false, reason: 'bad_answer' };
  const symbols = Object.values(a.symbols && typeof a.symbols === 'object' ? a.symbols : {})
    .filter((s): s is { name: string; score: number } => {
      const x = s as Record<string, unknown> | null;
      return typeof x?.name === 'string' && typeof x.score === 'number';
    })
    .map((s) => ({ name: s.name, score: round(s.score) }))
    .sort((x, y) => Math.abs(y.score) - Math.abs(x.score) || x.name.localeCompare(y.name))
    .slice(0, TOP_SYMBOLS);
  return {
    scored: true,
    score: round(a.score),
    required: typeof a.required_score === 'number' ? round(a.required_score) : 0,
    action: a.action,
    symbols,
  };
}

/**
 * The rspamd client: POSTs the raw message to `<url>/checkv2` with the transaction's IP, From, Rcpt, Helo and
 * Hostname, and answers its verdict. Bounded: `timeoutMs` for the whole exchange, the answer read up to
 * 256 KiB. It never throws: no answer in time, a refused connection or a strange answer is `scored: false`
 * with the reason, and the caller delivers the message unscored. Without a URL every message is unscored
 * (`not_configured`).
 */
export function createRspamdClient(opts: { url: string | undefined; timeoutMs: number }): SpamFilter {
  if (!opts.url) return { check: async () => ({ scored: false, reason: 'not_configured' }) };
  const base = new URL(opts.url);
  let path = base.pathname;
  while (path.endsWith('/')) path = path.slice(0, -1);
  const endpoint = new URL(`${path}/checkv2`, base);
  const tls = endpoint.protocol === 'https:';
  // One connection per scan: a kept-alive socket rspamd closed meanwhile would fail a scan for nothing.
  const agent = tls ? new HttpsAgent({ keepAlive: false }) : new HttpAgent({ keepAlive: false });
  const send = tls ? httpsRequest : httpRequest;

  return {
    check(raw, meta) {
      if (raw.length > MAX_SCAN_BYTES) return Promise.resolve({ scored: false, reason: 'too_large' });
      const headers: Record<string, string | string[]> = {
        'content-type': 'message/rfc822',
        'content-length': String(raw.length),
        IP: headerValue(meta.ip),
        Helo: headerValue(meta.helo),
      };
      // An empty envelope sender (a bounce) is told as none; rspamd takes one Rcpt header per recipient.
      if (meta.from) headers.From = headerValue(meta.from);
      if (meta.rcpts.length > 0) headers.Rcpt = meta.rcpts.slice(0, 100).map(headerValue);
      if (meta.hostname) headers.Hostname = headerValue(meta.hostname);
      return new Promise<SpamVerdict>((resolve) => {
        let settled = false;
        const done = (v: SpamVerdict) => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          resolve(v);
        };
        const req = send(endpoint, { method: 'POST', headers, agent }, (res) => {
          if (res.statusCode !== 200) {
            res.resume();
            return done({ scored: false, reason: 'bad_answer' });
          }
          const chunks: Buffer[] = [];
          let size = 0;
          res.on('data', (c: Buffer) => {
            size += c.length;
            if (size > MAX_ANSWER_BYTES) {
              req.destroy();
              return done({ scored: false, reason: 'bad_answer' });
            }
            chunks.push(c);
          });
          res.on('end', () => {
            try {
              done(verdictOf(JSON.parse(Buffer.concat(chunks).toString('utf8'))));
            } catch {
              done({ scored: false, reason: 'bad_answer' });
            }
          });
          res.on('error', () => done({ scored: false, reason: 'unreachable' }));
        });
        const timer = setTimeout(() => {
          done({ scored: false, reason: 'timeout' });
          req.destroy();
        }, opts.timeoutMs);
        req.on('error', () => done({ scored: false, reason: 'unreachable' }));
        req.end(raw);
      });
    },
  };
}

const X_SPAM = 'x-spam';

/**
 * The `X-Spam-*` header lines a stored mailbox copy starts with: `X-Spam-Score`, `X-Spam-Action` and
 * `X-Spam-Symbols` (name(score), folded), or `X-Spam-Status: unscored (<reason>)`.
 */
export function spamHeaderLines(v: SpamVerdict): string {
  if (!v.scored) return `X-Spam-Status: unscored (${v.reason})\r\n`;
  const names = v.symbols.map((s) => `${s.name}(${s.score})`);
  let symbols = 'X-Spam-Symbols:';
  let line = symbols.length;
  names.forEach((n, i) => {
    const part = ` ${n}${i < names.length - 1 ? ',' : ''}`;
    // Folded before 78 characters (RFC 5322): the continuation starts with a space.
    if (line + part.length > 76 && line > 16) {
      symbols += '\r\n';
      line = 0;
    }
    symbols += part;
    line += part.length;
  });
  return `X-Spam-Score: ${v.score} / ${v.required}\r\nX-Spam-Action: ${v.action}\r\n${symbols}\r\n`;
}

/**
 * A copy of `raw` with our `X-Spam-*` lines on top and any the sender wrote removed (a sender's
 * `X-Spam-Score: -10` must not pass for ours). Linear: the header block is walked line by line. With no
 * filter configured at all (`not_configured`) the message is stored as it came: there is nothing to say.
 */
export function withSpamHeaders(raw: Buffer, v: SpamVerdict): Buffer {
  if (!v.scored && v.reason === 'not_configured') return raw;
  const end = raw.indexOf('\r\n\r\n');
  const headerEnd = end < 0 ? raw.length : end + 2;
  const kept: Buffer[] = [];
  let dropping = false;
  let at = 0;
  while (at < headerEnd) {
    const nl = raw.indexOf('\r\n', at);
    const next = nl < 0 || nl + 2 > headerEnd ? headerEnd : nl + 2;
    const first = raw[at];
    const continuation = first === 0x20 || first === 0x09;
    if (!continuation)
      dropping =
        raw
          .subarray(at, at + X_SPAM.length)
          .toString('latin1')
          .toLowerCase() === X_SPAM;
    if (!dropping) kept.push(raw.subarray(at, next));
    at = next;
  }
  return Buffer.concat([Buffer.from(spamHeaderLines(v), 'latin1'), ...kept, raw.subarray(headerEnd)]);
}
