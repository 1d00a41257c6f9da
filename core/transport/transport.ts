import type { Resolver } from 'node:dns/promises';
import { mkdirSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { rootCertificates } from 'node:tls';
import { join } from 'node:path';
import nodemailer, { type Transporter } from 'nodemailer';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { isNoRecord } from '../dns.js';
import { isAppError } from '../errors.js';
import type { TlsOutcomeRecorder } from '../shaping/tls-outcomes.js';
import { resolveAllowed } from '../net/address-guard.js';
import { newId } from '../ids.js';
import type { Throttled } from '../shaping/connections.js';
import { createShaper, type Shaper } from '../shaping/shaper.js';
import type { ShapingConfig } from '../shaping/config.js';
import type { WarmupGate } from '../shaping/warmup.js';
import type { Stream } from '../egress/config.js';

import type { RecipientResult, RecipientStatus } from '../mail/recipients.js';
export type Envelope = { from: string; to: string[] };
export type { Throttled };
/**
 * What the sender adds to a transaction: a warming domain's per-site daily volume (MX delivery only); the
 * message's stream and the egress pool it leaves from (core/egress/router.ts); whether its sending domain
 * requires verified TLS (`tls: "enforced"`, docs/transport-policy.md).
 */
export type SendContext = {
  warmup?: WarmupGate;
  stream?: Stream;
  pool?: string;
  tlsRequired?: boolean;
  /** Whose mail it is, for the outcomes counted per source and pool (core/egress/counters.ts). */
  owner?: { userId: string | null; domainId: string | null };
};
/** A transaction that did not happen because its site cannot take it yet (shaping): the message waits `waitMs`. */
export const isThrottled = (r: RecipientResult[] | Throttled): r is Throttled => !Array.isArray(r);
export type OutboundTransport = {
  /** Splits recipients into SMTP transactions: one per recipient domain for MX delivery, one otherwise. */
  group(recipients: string[]): string[][];
  /**
   * One transaction; answers an outcome for every recipient of `envelope.to`, or Throttled when the
   * recipients' site cannot take it yet (nothing was sent). Never throws for SMTP or network errors.
   */
  send(
    messageId: string,
    envelope: Envelope,
    raw: Buffer,
    subject: string | null,
    ctx?: SendContext,
  ): Promise<RecipientResult[] | Throttled>;
  close(): void;
};

/** SMTP connect, greeting and socket timeouts (OUTBOUND_SMTP_TIMEOUT_MS), so a stalled server cannot hold a batch. */
export type SmtpTimeouts = { timeoutMs: number };
const timeoutsOf = (t: SmtpTimeouts) => ({
  connectionTimeout: t.timeoutMs,
  greetingTimeout: t.timeoutMs,
  socketTimeout: t.timeoutMs,
  dnsTimeout: t.timeoutMs,
});

type SmtpError = {
  responseCode?: number;
  response?: string;
  message?: string;
  recipient?: string;
  rejectedErrors?: SmtpError[];
};
const textOf = (e: SmtpError) => e.response ?? e.message ?? 'failed';
const statusOf = (code: number | undefined): RecipientStatus => (code && code >= 500 ? 'bounced' : 'deferred');

/** Per-recipient results of a nodemailer answer: accepted ones sent, refused ones by their reply code. */
export function resultsOf(
  to: string[],
  info: { response?: string; rejectedErrors?: SmtpError[] } | undefined,
  err?: SmtpError,
): RecipientResult[] {
  const refused = new Map<string, SmtpError>();
  for (const e of err?.rejectedErrors ?? info?.rejectedErrors ?? [])
    if (e.recipient) refused.set(e.recipient.toLowerCase(), e);
  return to.map((address) => {
    const r = refused.get(address.toLowerCase());
    if (r) return { address, status: statusOf(r.responseCode), response: textOf(r) };
    // The whole transaction failed (connection, MAIL FROM, DATA): every recipient shares its fate.
    if (err) return { address, status: statusOf(err.responseCode), response: textOf(err) };
    return { address, status: 'sent', response: info?.response ?? 'ok' };
  });
}

/**
 * The local outbox (OUTBOUND_MODE=capture): keeps the bytes in the `outbox` table and, when `dir` is
 * given, as `<dir>/<msg_id>.eml` for a newcomer to open. Idempotent per message.
 */
export function captureTransport(db: Db, dir?: string): OutboundTransport {
  if (dir) mkdirSync(dir, { recursive: true });
  return {
    group: (recipients) => (recipients.length ? [recipients] : []),
    async send(messageId, envelope, raw, subject) {
      await db
        .insert(schema.outbox)
        .values({
          id: newId('obx'),
          messageId,
          envelopeFrom: envelope.from,
          envelopeTo: envelope.to,
          subject,
          raw: raw.toString('utf8'),
          createdAt: Date.now(),
        })
        .onConflictDoNothing();
      if (dir) await writeFile(join(dir, `${messageId}.eml`), raw);
      return envelope.to.map((address) => ({ address, status: 'sent' as const, response: 'captured' }));
    },
    close() {},
  };
}

/** Everything through one smarthost (OUTBOUND_MODE=relay), over pooled connections. */
export function relayTransport(relayUrl: string, timeouts: SmtpTimeouts): OutboundTransport {
  const url = relayUrl.includes('?') ? `${relayUrl}&pool=true` : `${relayUrl}?pool=true`;
  const transport = nodemailer.createTransport(url, timeoutsOf(timeouts) as never);
  return {
    group: (recipients) => (recipients.length ? [recipients] : []),
    async send(_id, envelope, raw) {
      try {
        return resultsOf(envelope.to, await transport.sendMail({ envelope, raw }));
      } catch (err) {
        return resultsOf(envelope.to, undefined, err as SmtpError);
      }
    },
    close: () => transport.close(),
  };
}

const domainOfRcpt = (rcpt: string) => rcpt.slice(rcpt.lastIndexOf('@') + 1).toLowerCase();

/** Direct delivery to each recipient domain's MX (OUTBOUND_MODE=mx), resolved through DNS_SERVERS. */
export function mxTransport(opts: {
  resolver: Resolver;
  port: number;
  heloName: string;
  timeouts: SmtpTimeouts;
  allowPrivate?: boolean;
  shaping?: { db: Db; config: ShapingConfig };
  /** Counts each shaped session's TLS outcome per recipient domain (docs/tls-reporting.md); its owner flushes and closes it. */
  tls?: TlsOutcomeRecorder;
  /** PEM certificates trusted beside the system's roots when an MX's certificate is judged (OUTBOUND_TLS_CA_FILE). */
  trustedCa?: string;
}): OutboundTransport {
  const pools = new Map<string, Transporter>();
  // Certificates are judged (for TLS reports), never required: delivery still takes any certificate.
  const ca = opts.trustedCa ? { ca: [...rootCertificates, opts.trustedCa] } : {};
  // MX and address answers are kept for a minute: a burst to one domain should not cost lookups per message.
  const mxCache = new Map<string, { at: number; hosts: string[] }>();
  const aCache = new Map<string, { at: number; address: string }>();
  const poolFor = (address: string) => {
    let t = pools.get(address);
    if (!t) {
      t = nodemailer.createTransport({
        host: address,
        port: opts.port,
        pool: true,
        maxConnections: 5,
        name: opts.heloName,
        opportunisticTLS: true,
        tls: { rejectUnauthorized: false, ...ca },
        ...timeoutsOf(opts.timeouts),
      });
      pools.set(address, t);
    }
    return t;
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
    const { address } = await resolveAllowed(host, {
      resolver: opts.resolver,
      allowPrivate: opts.allowPrivate ?? false,
      what: 'MX host',
    });
    aCache.set(host, { at: Date.now(), address });
    return address;
  }

  // Egress shaping per site (docs/deliverability.md): limits shared through PostgreSQL, leased connections.
  const shaper: Shaper | undefined =
    opts.shaping &&
    createShaper({
      db: opts.shaping.db,
      config: opts.shaping.config,
      resolveMx: mxHosts,
      addressOf: addressOfShaped,
      smtp: { port: opts.port, heloName: opts.heloName, timeoutMs: opts.timeouts.timeoutMs, tls: opts.tls, ...ca },
    });
  async function addressOfShaped(host: string): Promise<string> {
    try {
      return await addressOf(host);
    } catch (err) {
      throw Object.assign(err as Error, { permanent: isNoRecord(err) || (isAppError(err) && !err.retryable) });
    }
  }

  async function sendShaped(
    s: Shaper,
    domain: string,
    hosts: string[],
    envelope: Envelope,
    raw: Buffer,
    ctx?: SendContext,
  ): Promise<RecipientResult[] | Throttled> {
    const site = await s.site(domain, hosts);
    // A warming domain's day's volume to this site first; given back when the site cannot take the message after all.
    const warm = ctx?.warmup ? await ctx.warmup.take(site.key) : true;
    if (warm !== true) return warm;
    const giveBack = () => ctx?.warmup?.giveBack(site.key).catch(() => undefined);
    const admitted = await s.admit(site);
    if ('throttled' in admitted) {
      await giveBack();
      return admitted;
    }
    const r = await s.send(site, admitted.limits, envelope, raw);
    if ('throttled' in r) {
      await giveBack();
      return r;
    }
    const tagged = (results: RecipientResult[]) => results.map((x) => ({ ...x, site: site.key }));
    // Refusals went through the site's automation rules inside the pool (before the slot was given back).
    if ('info' in r) return tagged(resultsOf(envelope.to, r.info));
    const err = r.err as SmtpError & { permanent?: boolean };
    if (!err.responseCode && !err.rejectedErrors) {
      return tagged(
        envelope.to.map((address) => ({
          address,
          status: err.permanent ? ('bounced' as const) : ('deferred' as const),
          response: textOf(err),
        })),
      );
    }
    return tagged(resultsOf(envelope.to, undefined, err));
  }

  return {
    group(recipients) {
      const byDomain = new Map<string, string[]>();
      for (const r of recipients) byDomain.set(domainOfRcpt(r), [...(byDomain.get(domainOfRcpt(r)) ?? []), r]);
      return [...byDomain.values()];
    },
    async send(_id, envelope, raw, _subject, ctx) {
      const domain = domainOfRcpt(envelope.to[0] ?? '');
      const all = (status: RecipientStatus, response: string) =>
        envelope.to.map((address) => ({ address, status, response }));
      let hosts: string[];
      try {
        hosts = await mxHosts(domain);
      } catch (err) {
        return all('deferred', `MX lookup for ${domain} failed: ${(err as Error).message}`);
      }
      if (shaper) return sendShaped(shaper, domain, hosts, envelope, raw, ctx);
      let last = all('deferred', `no MX host for ${domain}`);
      for (const host of hosts) {
        let address: string;
        try {
          address = await addressOf(host);
        } catch (err) {
          last = all(
            (isNoRecord(err) || (isAppError(err) && !err.retryable)) && hosts.length === 1 ? 'bounced' : 'deferred',
            `cannot use ${host}: ${(err as Error).message}`,
          );
          continue;
        }
        try {
          return resultsOf(envelope.to, await poolFor(address).sendMail({ envelope, raw }));
        } catch (err) {
          last = resultsOf(envelope.to, undefined, err as SmtpError);
          // A 5xx for the whole transaction is final; a connection failure tries the next MX host.
          if ((err as SmtpError).responseCode || (err as SmtpError).rejectedErrors) return last;
        }
      }
      return last;
    },
    close() {
      for (const t of pools.values()) t.close();
      void shaper?.close();
    },
  };
}
