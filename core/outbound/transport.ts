import type { Resolver } from 'node:dns/promises';
import { mkdirSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import nodemailer, { type Transporter } from 'nodemailer';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { isNoRecord } from '../dns.js';
import { isAppError } from '../errors.js';
import { resolveAllowed } from '../net/address-guard.js';
import { newId } from '../ids.js';

export type Rejection = { address: string; error: string; permanent: boolean };
export type SendOutcome = { status: 'sent'; response?: string; rejected?: Rejection[] } | { status: 'temporary' | 'permanent'; error: string };
export type Envelope = { from: string; to: string[] };
export type OutboundTransport = {
  send(messageId: string, envelope: Envelope, raw: Buffer, subject: string | null): Promise<SendOutcome>;
  close(): void;
};

/** Classifies an SMTP error: 5xx replies are permanent, everything else (4xx, network) temporary. */
export function classifySmtpError(err: unknown): SendOutcome {
  const e = err as { responseCode?: number; response?: string; message?: string };
  const error = e.response ?? e.message ?? String(err);
  return { status: e.responseCode && e.responseCode >= 500 ? 'permanent' : 'temporary', error };
}

/** Recipients refused while others were accepted (nodemailer reports them on a successful send). */
function rejectionsOf(info: unknown): Rejection[] {
  const errors = (info as { rejectedErrors?: { recipient?: string; responseCode?: number; response?: string; message?: string }[] }).rejectedErrors;
  return (errors ?? []).map((e) => ({
    address: e.recipient ?? '', error: e.response ?? e.message ?? 'rejected', permanent: (e.responseCode ?? 0) >= 500,
  }));
}

/**
 * The local outbox (OUTBOUND_MODE=capture): keeps the bytes in the `outbox` table and, when `dir` is
 * given, as `<dir>/<msg_id>.eml` for a newcomer to open. Idempotent per message.
 */
export function captureTransport(db: Db, dir?: string): OutboundTransport {
  if (dir) mkdirSync(dir, { recursive: true });
  return {
    async send(messageId, envelope, raw, subject) {
      await db.insert(schema.outbox).values({
        id: newId('obx'), messageId, envelopeFrom: envelope.from, envelopeTo: envelope.to, subject, raw: raw.toString('utf8'), createdAt: Date.now(),
      }).onConflictDoNothing();
      if (dir) await writeFile(join(dir, `${messageId}.eml`), raw);
      return { status: 'sent', response: 'captured' };
    },
    close() {},
  };
}

/** Everything through one smarthost (OUTBOUND_MODE=relay), over pooled connections. */
export function relayTransport(relayUrl: string): OutboundTransport {
  const transport = nodemailer.createTransport(relayUrl.includes('?') ? `${relayUrl}&pool=true` : `${relayUrl}?pool=true`);
  return {
    async send(_id, envelope, raw) {
      try {
        const info = await transport.sendMail({ envelope, raw });
        return { status: 'sent', response: info.response, rejected: rejectionsOf(info) };
      } catch (err) {
        return classifySmtpError(err);
      }
    },
    close: () => transport.close(),
  };
}

/** Direct delivery to each recipient domain's MX (OUTBOUND_MODE=mx), resolved through DNS_SERVERS. */
export function mxTransport(opts: { resolver: Resolver; port: number; heloName: string; allowPrivate?: boolean }): OutboundTransport {
  const pools = new Map<string, Transporter>();
  // MX and address answers are kept for a minute: a burst to one domain should not cost lookups per message.
  const mxCache = new Map<string, { at: number; hosts: string[] }>();
  const aCache = new Map<string, { at: number; address: string }>();
  const poolFor = (host: string) => {
    let t = pools.get(host);
    if (!t) {
      t = nodemailer.createTransport({ host, port: opts.port, pool: true, maxConnections: 5, name: opts.heloName, opportunisticTLS: true, tls: { rejectUnauthorized: false }, connectionTimeout: 30_000 });
      pools.set(host, t);
    }
    return t;
  };
  return {
    async send(_id, envelope, raw) {
      const byDomain = new Map<string, string[]>();
      for (const rcpt of envelope.to) {
        const domain = rcpt.slice(rcpt.lastIndexOf('@') + 1).toLowerCase();
        byDomain.set(domain, [...(byDomain.get(domain) ?? []), rcpt]);
      }
      const outcomes: SendOutcome[] = [];
      for (const [domain, rcpts] of byDomain) outcomes.push(await sendToDomain(domain, { from: envelope.from, to: rcpts }, raw));
      return outcomes.find((o) => o.status === 'temporary') ?? outcomes.find((o) => o.status === 'permanent') ?? outcomes[0] ?? { status: 'sent' };
    },
    close() {
      for (const t of pools.values()) t.close();
    },
  };

  async function mxHosts(domain: string): Promise<string[]> {
    const hit = mxCache.get(domain);
    if (hit && Date.now() - hit.at < 60_000) return hit.hosts;
    let hosts: string[];
    try {
      const mx = await opts.resolver.resolveMx(domain);
      hosts = mx.sort((a, b) => a.priority - b.priority).map((r) => r.exchange);
      if (hosts.length === 0) hosts = [domain];
    } catch (err) {
      if (!isNoRecord(err)) throw err;
      hosts = [domain]; // RFC 5321 §5.1: no MX, use the domain's own address
    }
    mxCache.set(domain, { at: Date.now(), hosts });
    return hosts;
  }

  async function addressOf(host: string): Promise<string> {
    const hit = aCache.get(host);
    if (hit && Date.now() - hit.at < 60_000) return hit.address;
    // Resolved once and checked (no internal addresses unless ALLOW_PRIVATE_NETWORKS); the pool connects to this address.
    const { address } = await resolveAllowed(host, { resolver: opts.resolver, allowPrivate: opts.allowPrivate ?? false, what: 'MX host' });
    aCache.set(host, { at: Date.now(), address });
    return address;
  }

  async function sendToDomain(domain: string, envelope: Envelope, raw: Buffer): Promise<SendOutcome> {
    let hosts: string[];
    try {
      hosts = await mxHosts(domain);
    } catch (err) {
      return { status: 'temporary', error: `MX lookup for ${domain} failed: ${(err as Error).message}` };
    }
    let last: SendOutcome = { status: 'temporary', error: `no MX host for ${domain}` };
    for (const host of hosts) {
      let address: string;
      try {
        address = await addressOf(host);
      } catch (err) {
        last = { status: (isNoRecord(err) || (isAppError(err) && !err.retryable)) && hosts.length === 1 ? 'permanent' : 'temporary', error: `cannot resolve ${host}: ${(err as Error).message}` };
        continue;
      }
      try {
        const info = await poolFor(address).sendMail({ envelope, raw });
        return { status: 'sent', response: info.response, rejected: rejectionsOf(info) };
      } catch (err) {
        last = classifySmtpError(err);
        if (last.status === 'permanent') return last;
      }
    }
    return last;
  }
}
