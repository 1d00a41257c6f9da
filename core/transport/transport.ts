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
import { whyUnverified, type SmtpFailure, type Throttled } from '../shaping/connections.js';
import { createShaper, type Shaper } from '../shaping/shaper.js';
import type { ShapingConfig } from '../shaping/config.js';
import type { WarmupGate } from '../shaping/warmup.js';
import { DEFAULT_SOURCE, defaultEgress, type EgressConfig, type Stream } from '../egress/config.js';
import { poolNameOf, routeOf, sourcesInOrder } from './sources.js';
import { allowedHosts, noMtaSts, type MtaStsLookup, type MtaStsPolicy } from '../mta-sts/policy.js';
import type { TlsSession } from '../shaping/tls-outcomes.js';

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

/**
 * Everything through one smarthost (OUTBOUND_MODE=relay), over pooled connections. Mail of a sending domain
 * that requires TLS (`tls: "enforced"`) goes over a second pool that demands STARTTLS and a certificate valid
 * for the relay's name (implicit TLS for smtps://); when the relay cannot give one, its recipients are
 * deferred `tls_required` with the reason, and nothing was sent.
 */
export function relayTransport(relayUrl: string, timeouts: SmtpTimeouts): OutboundTransport {
  const url = relayUrl.includes('?') ? `${relayUrl}&pool=true` : `${relayUrl}?pool=true`;
  const transport = nodemailer.createTransport(url, timeoutsOf(timeouts) as never);
  let strict: Transporter | undefined;
  const strictPool = () =>
    (strict ??= nodemailer.createTransport({
      url: relayUrl,
      pool: true,
      ...timeoutsOf(timeouts),
      requireTLS: true,
      tls: { rejectUnauthorized: true },
    } as never));
  return {
    group: (recipients) => (recipients.length ? [recipients] : []),
    async send(_id, envelope, raw, _subject, ctx) {
      const required = ctx?.tlsRequired === true;
      try {
        return resultsOf(envelope.to, await (required ? strictPool() : transport).sendMail({ envelope, raw }));
      } catch (err) {
        const e = err as SmtpError & { code?: string };
        // STARTTLS refused or a certificate not valid (ETLS), or no reply at all: the requirement was not met.
        if (required && !e.rejectedErrors && (e.code === 'ETLS' || !e.responseCode))
          return envelope.to.map((address) => ({
            address,
            status: 'deferred' as const,
            response: `TLS required by the sending domain: the relay gave no verified TLS (${textOf(e)})`,
            bounceClass: 'tls_required' as const,
          }));
        return resultsOf(envelope.to, undefined, e);
      }
    },
    close: () => {
      transport.close();
      strict?.close();
    },
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
  /** Egress sources and pools (EGRESS_FILE): where each shaped transaction leaves from. */
  egress?: EgressConfig;
  /** Recipient domains' MTA-STS policies, as cached by their workflow (shaped path only). */
  mtaSts?: MtaStsLookup;
}): OutboundTransport {
  const egress = opts.egress ?? defaultEgress();
  const mtaSts = opts.mtaSts ?? noMtaSts;
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

  /**
   * One transaction over the shaped path (docs/egress.md): from the sources of the message's pool in
   * order, each seeing the site through its own shaping (source, site); a source the site cannot take
   * now (throttled, suspended) hands the message to the next at once. Throttled only when every source is.
   */
  async function sendShaped(
    s: Shaper,
    messageId: string,
    domain: string,
    hosts: string[],
    envelope: Envelope,
    raw: Buffer,
    ctx?: SendContext,
  ): Promise<RecipientResult[] | Throttled> {
    const pool = poolNameOf(egress, ctx);
    const sources = sourcesInOrder(egress, pool, messageId);
    // The recipient domain's MTA-STS policy, as its workflow cached it (only direct delivery applies it).
    let policy: MtaStsPolicy | null = null;
    if (sources.some((x) => !x.relay)) {
      const answer = await mtaSts
        .policyFor(domain)
        .catch(
          (err: Error) => ({ pending: true, waitMs: 60_000, cause: `MTA-STS lookup failed: ${err.message}` }) as const,
        );
      if ('pending' in answer) return { throttled: true, waitMs: answer.waitMs, cause: answer.cause };
      policy = answer.policy;
    }
    const destination = await s.site(domain, hosts);
    // A warming domain's day's volume to this site first; given back when the site cannot take the message after all.
    const warm = ctx?.warmup ? await ctx.warmup.take(destination.key) : true;
    if (warm !== true) return warm;
    const giveBack = () => ctx?.warmup?.giveBack(destination.key).catch(() => undefined);
    const demand = { domainRequires: ctx?.tlsRequired === true, policy };
    // MX names as the site and its connections know them (lowercase, no trailing dot), for the policy's matches.
    const names = destination.hosts;
    const throttles: Throttled[] = [];
    let answered: RecipientResult[] | undefined;
    for (const [i, source] of sources.entries()) {
      const route = routeOf(source, { heloName: opts.heloName, resolver: opts.resolver, domain, hosts: names, demand });
      const tag = (results: RecipientResult[], tls?: string) =>
        results.map((x) => ({ ...x, site: destination.key, source: source.name, pool, ...(tls ? { tls } : {}) }));
      if ('refused' in route) {
        answered = tag(
          envelope.to.map((address) => ({
            address,
            status: 'deferred' as const,
            response: route.refused,
            bounceClass: 'tls_required' as const,
          })),
        );
        break;
      }
      const site = source.relay
        ? await s.site(source.relay.host, [source.relay.host], source.name)
        : source.name === DEFAULT_SOURCE
          ? destination
          : await s.site(domain, hosts, source.name);
      const admitted = await s.admit(site);
      if ('throttled' in admitted) {
        throttles.push(admitted);
        continue;
      }
      const r = await s.send(site, admitted.limits, envelope, raw, route);
      if ('throttled' in r) {
        throttles.push(r);
        continue;
      }
      const note = !source.relay && policy?.mode === 'testing' ? testingNote(policy, names, r.session) : undefined;
      answered = tag(resultsOfShaped(envelope.to, r), note);
      // The source itself cannot connect (its bind address is not on this host): nothing was sent, the next source takes it.
      if (i < sources.length - 1 && 'err' in r && (r.err as { syscall?: string }).syscall === 'bind') continue;
      // Refused before anything was accepted and the source is now suspended for the site: the next source at once.
      if (i < sources.length - 1 && answered.every((x) => x.status === 'deferred') && (await s.suspended(site)))
        continue;
      break;
    }
    if (answered) return answered;
    await giveBack();
    if (!throttles.length) return { throttled: true, waitMs: 60_000, cause: `pool ${pool} has no source` };
    return throttles.reduce((a, b) => (b.waitMs < a.waitMs ? b : a));
  }

  /** What an MTA-STS `testing` policy would have refused of the session the mail went over (none: it passed). */
  function testingNote(policy: MtaStsPolicy, hosts: string[], session: TlsSession | undefined): string | undefined {
    if (!session) return undefined;
    if (!allowedHosts(policy, hosts).includes(session.mxHost))
      return `MTA-STS testing: ${session.mxHost} is not in the policy's mx (${policy.mx.join(', ')})`;
    return session.result === 'success' ? undefined : `MTA-STS testing: ${whyUnverified(session)}`;
  }

  /** Per-recipient results of one shaped transaction (refusals already went through the site's automation rules). */
  function resultsOfShaped(to: string[], r: { info: unknown } | { err: SmtpFailure }): RecipientResult[] {
    if ('info' in r) return resultsOf(to, r.info as Parameters<typeof resultsOf>[1]);
    const err = r.err as SmtpError & SmtpFailure;
    if (err.tlsRequired)
      return to.map((address) => ({
        address,
        status: 'deferred' as const,
        response: textOf(err),
        bounceClass: 'tls_required' as const,
      }));
    if (!err.responseCode && !err.rejectedErrors)
      return to.map((address) => ({
        address,
        status: err.permanent ? ('bounced' as const) : ('deferred' as const),
        response: textOf(err),
      }));
    return resultsOf(to, undefined, err);
  }

  return {
    group(recipients) {
      const byDomain = new Map<string, string[]>();
      for (const r of recipients) byDomain.set(domainOfRcpt(r), [...(byDomain.get(domainOfRcpt(r)) ?? []), r]);
      return [...byDomain.values()];
    },
    async send(messageId, envelope, raw, _subject, ctx) {
      const domain = domainOfRcpt(envelope.to[0] ?? '');
      const all = (status: RecipientStatus, response: string) =>
        envelope.to.map((address) => ({ address, status, response }));
      let hosts: string[];
      try {
        hosts = await mxHosts(domain);
      } catch (err) {
        return all('deferred', `MX lookup for ${domain} failed: ${(err as Error).message}`);
      }
      if (shaper) return sendShaped(shaper, messageId, domain, hosts, envelope, raw, ctx);
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
