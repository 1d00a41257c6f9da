import type { Resolver } from 'node:dns/promises';

/** The DMARC policies under which a forward's From is rewritten to the forwarding domain (as mailing lists do). */
const STRICT = new Set(['quarantine', 'reject']);

/**
 * The DMARC policy (`p=`) the From domain publishes: `_dmarc.<domain>` TXT, else each parent's up to the
 * last two labels (DMARCbis's tree walk, where a parent's `sp=` applies to its subdomains). `none` when
 * nothing is published or the lookup fails or takes longer than `timeoutMs` (the forward goes unchanged).
 */
export async function dmarcPolicy(resolver: Resolver, domain: string, timeoutMs = 3000): Promise<string> {
  const labels = domain.toLowerCase().split('.').filter(Boolean);
  const walk = async () => {
    for (let i = 0; i + 2 <= labels.length && i < 5; i++) {
      const record = await dmarcRecord(resolver, labels.slice(i).join('.'));
      if (!record) continue;
      const tags = new Map(
        record.split(';').map((t) => {
          const eq = t.indexOf('=');
          return [
            t
              .slice(0, eq < 0 ? t.length : eq)
              .trim()
              .toLowerCase(),
            eq < 0 ? '' : t.slice(eq + 1).trim(),
          ];
        }),
      );
      const p = (i > 0 && tags.get('sp')) || tags.get('p') || 'none';
      return p.toLowerCase();
    }
    return 'none';
  };
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<string>((resolve) => {
    timer = setTimeout(() => resolve('none'), timeoutMs);
  });
  try {
    return await Promise.race([walk().catch(() => 'none'), late]);
  } finally {
    clearTimeout(timer);
  }
}

async function dmarcRecord(resolver: Resolver, name: string): Promise<string | undefined> {
  const rows = await resolver.resolveTxt(`_dmarc.${name}`).catch(() => [] as string[][]);
  const found = rows.map((r) => r.join('').trim()).filter((r) => /^v=DMARC1\s*(?:;|$)/i.test(r));
  // Several DMARC records are no policy at all (RFC 7489 6.6.3).
  return found.length === 1 ? found[0] : undefined;
}

export const rewritesFrom = (policy: string) => STRICT.has(policy);

/** `"Alice via acme.example"`: the display name of a rewritten From (RFC 2047 encoded when not plain ASCII). */
export function viaName(originalName: string, originalAddress: string, domain: string): string {
  const who = (originalName.trim() || originalAddress).replace(/[\r\n]+/g, ' ');
  const phrase = `${who} via ${domain}`;
  if (/^[\x20-\x7e]*$/.test(phrase)) return `"${phrase.replace(/(["\\])/g, '\\$1')}"`;
  return `=?UTF-8?B?${Buffer.from(phrase, 'utf8').toString('base64')}?=`;
}

/**
 * The bytes a forward sends: the original message with `X-Svc-Forwarded-For` first (no forward loops),
 * and, when `from` is given, its From header replaced by it and the original From kept as `Reply-To`
 * (an existing Reply-To, the author's own choice, stays). The body is untouched, so a DKIM signature of
 * the original that does not cover the From it had still verifies.
 */
export function forwardBytes(raw: Buffer, opts: { forwardedFor: string; from?: string }): Buffer {
  const text = raw.toString('latin1');
  const end = headerEnd(text);
  const head = text.slice(0, end);
  const rest = text.slice(end);
  const fields = splitFields(head);
  let out = fields;
  if (opts.from) {
    const original = fields.find((f) => fieldName(f) === 'from');
    const hasReplyTo = fields.some((f) => fieldName(f) === 'reply-to');
    out = fields.filter((f) => fieldName(f) !== 'from');
    out.unshift(`From: ${opts.from}\r\n`);
    if (original && !hasReplyTo) out.push(`Reply-To:${original.slice(original.indexOf(':') + 1)}`);
  }
  const lead = `X-Svc-Forwarded-For: ${opts.forwardedFor}\r\n`;
  return Buffer.from(lead + out.join('') + rest, 'latin1');
}

/** Where the header block ends (the empty line stays with the body); the whole text when there is none. */
function headerEnd(text: string): number {
  if (text.startsWith('\r\n')) return 0;
  const i = text.indexOf('\r\n\r\n');
  return i < 0 ? text.length : i + 2;
}

/** Header fields, each with its folded continuation lines and CRLF. */
function splitFields(head: string): string[] {
  const fields: string[] = [];
  let start = 0;
  while (start < head.length) {
    let next = head.indexOf('\r\n', start);
    if (next < 0) next = head.length - 2;
    // Continuation lines begin with a space or a tab.
    while (next + 2 < head.length && (head[next + 2] === ' ' || head[next + 2] === '\t')) {
      const after = head.indexOf('\r\n', next + 2);
      next = after < 0 ? head.length - 2 : after;
    }
    fields.push(head.slice(start, next + 2));
    start = next + 2;
  }
  return fields;
}

const fieldName = (field: string) =>
  field
    .slice(0, Math.max(0, field.indexOf(':')))
    .trim()
    .toLowerCase();
