import { isIP } from 'node:net';
import SMTPConnection from 'nodemailer/lib/smtp-connection';
import { isTlsFailure, sessionOf, type TlsOutcomeRecorder, type TlsSession } from './tls-outcomes.js';
import type { Limits } from './config.js';
import type { Site } from './sites.js';
import type { ShapingStore } from './store.js';

/**
 * "Not now" from shaping: nothing was sent. `site` is the site that could not take it; `spacingMs`, when
 * its message rate was the limit, is the interval between two of its messages, so a batch spreads the
 * waits of the messages it holds for that site instead of retrying them all at once.
 */
export type Throttled = { throttled: true; waitMs: number; cause: string; site?: string; spacingMs?: number };
/** What one transaction over a shaped connection came to: the server's answer, an error, or "not now". */
export type PoolResult =
  | { info: SMTPConnection.SentMessageInfo; session?: TlsSession }
  | { err: SmtpFailure; session?: TlsSession }
  | Throttled;
export type SmtpFailure = Error & {
  responseCode?: number;
  response?: string;
  code?: string;
  rejectedErrors?: unknown[];
  permanent?: boolean;
  /** No connection was had (nothing of the message was sent): the failure came before MAIL FROM. */
  connect?: boolean;
  /** Verified TLS was required and no host of the site gave it (the message says why). */
  tlsRequired?: boolean;
};

/**
 * How connections of one (source, site) are made (core/transport/sources.ts): the local address bound and
 * the EHLO name of a local source, or a relay's port, TLS and credentials. `require`: this transaction
 * goes only over a session judged `success` (encrypted, certificate trusted and valid for the host),
 * and only to `hosts` when given (MTA-STS enforce); `why` opens the reason when none can be had.
 */
export type Route = {
  localAddress?: string;
  name?: string;
  port?: number;
  secure?: boolean;
  requireTLS?: boolean;
  rejectUnauthorized?: boolean;
  auth?: { user: string; pass: string };
  /** Resolves the host to connect to (a relay named by the operator is not checked as an MX is). */
  addressOf?: (host: string) => Promise<string>;
  require?: { why: string; hosts?: string[] };
};
/** `tls` counts each session's TLS outcome per recipient domain (TLS reports, docs/tls-reporting.md). */
export type SmtpOptions = {
  port: number;
  heloName: string;
  timeoutMs: number;
  tls?: TlsOutcomeRecorder;
  /** The roots an MX's certificate is judged against, when OUTBOUND_TLS_CA_FILE adds to the system's. */
  ca?: string[];
};

type Conn = {
  leaseId: string;
  smtp: SMTPConnection;
  sent: number;
  busy: boolean;
  closing: boolean;
  closeSent?: boolean;
  leaseUntil: number;
  idle?: NodeJS.Timeout;
  ended: Promise<void>;
  /** The host it is connected to, its TLS outcome, and the recipient domains it was counted for (a session counts once per domain). */
  host: string;
  session?: TlsSession;
  counted: Set<string>;
};

/**
 * Keeps a lease alive while this process holds it: renewed every third of its TTL, so a crashed worker's
 * slots come back within one TTL. `kept` learns each new expiry, so a transaction does not renew it again.
 */
function keepLease(
  store: ShapingStore,
  leaseId: string,
  ttlMs: number,
  lost: () => void,
  kept: (until: number) => void,
): () => void {
  const timer = setInterval(
    () => {
      const until = Date.now() + ttlMs;
      store.renewLease(leaseId, until).then(
        (held) => {
          if (held) kept(until);
          else lost();
        },
        () => undefined,
      );
    },
    Math.max(250, Math.floor(ttlMs / 3)),
  );
  timer.unref();
  return () => clearInterval(timer);
}
type SiteConns = { conns: Conn[]; opening: number; waiters: (() => void)[] };

/** Whether a connection may carry mail that requires verified TLS (to one of `hosts`, when given). */
const fits = (c: Conn, require: Route['require']) =>
  !require || (c.session?.result === 'success' && (!require.hosts || require.hosts.includes(c.host)));

/** Why a session is not verified, as the deferral reason says it. */
export const whyUnverified = (s: TlsSession) =>
  s.result === 'starttls-not-supported' ? `${s.mxHost} offers no STARTTLS` : `${s.result} at ${s.mxHost}`;

/**
 * This process's SMTP connections, per site, each holding a lease (a slot of the site's
 * connection_limit across every worker, core/shaping/store.ts). A message takes an idle connection of
 * its site, or a new one when a lease (and a connection-rate token) is granted; when the site's slots
 * are all taken it waits here only behind this process's own connections to that site (each busy with
 * one transaction); when they are all elsewhere it answers Throttled, and the message waits durably.
 * A connection closes after max_deliveries_per_connection messages, when idle for `idleMs`, or when its
 * site is suspended; its lease is given back once the socket has closed.
 */
export function createConnectionPool(deps: {
  store: ShapingStore;
  holder: string;
  smtp: SmtpOptions;
  addressOf: (host: string) => Promise<string>;
  ttlMs?: number;
  idleMs?: number;
}) {
  const ttlMs = deps.ttlMs ?? 15_000;
  const idleMs = deps.idleMs ?? 5_000;
  const bySite = new Map<string, SiteConns>();
  const entryOf = (key: string) => {
    let e = bySite.get(key);
    if (!e) bySite.set(key, (e = { conns: [], opening: 0, waiters: [] }));
    return e;
  };
  const wake = (e: SiteConns) => e.waiters.splice(0).forEach((w) => w());

  function retire(_e: SiteConns, c: Conn, quit: boolean): void {
    c.closing = true;
    clearTimeout(c.idle);
    if (c.busy || c.closeSent) return; // a busy one closes when its transaction is done
    c.closeSent = true;
    if (quit) c.smtp.quit();
    else c.smtp.close();
  }

  /** Opens a connection under `leaseId` to the first of the site's hosts that greets us. */
  async function open(
    site: Site,
    e: SiteConns,
    leaseId: string,
    judge: Judge,
    route: Route,
  ): Promise<Conn | { err: SmtpFailure }> {
    let last: SmtpFailure = Object.assign(new Error(`no MX host of ${site.domain} could be used`), {});
    let unusable = 0;
    const refused: string[] = [];
    const hosts = route.require?.hosts ?? site.hosts;
    let current: Conn | undefined;
    // From the grant to the socket's end; a lease taken back (it lapsed) closes the connection.
    const stopKeeping = keepLease(
      deps.store,
      leaseId,
      ttlMs,
      () => {
        if (current) retire(e, current, true);
      },
      (until) => {
        if (current) current.leaseUntil = Math.max(current.leaseUntil, until);
      },
    );
    for (const host of hosts) {
      let address: string;
      try {
        address = await (route.addressOf ?? deps.addressOf)(host);
      } catch (err) {
        unusable += 1;
        last = Object.assign(new Error(`cannot use ${host}: ${(err as Error).message}`), {
          permanent: (err as SmtpFailure).permanent,
        });
        continue;
      }
      const smtp = new SMTPConnection({
        host: address,
        port: route.port ?? deps.smtp.port,
        name: route.name ?? deps.smtp.heloName,
        ...(route.localAddress ? { localAddress: route.localAddress } : {}),
        secure: route.secure ?? false,
        ...(route.requireTLS ? { requireTLS: true } : { opportunisticTLS: !route.secure }),
        tls: {
          rejectUnauthorized: route.rejectUnauthorized ?? false,
          ...(isIP(host) ? {} : { servername: host }),
          ...(deps.smtp.ca ? { ca: deps.smtp.ca } : {}),
        },
        connectionTimeout: deps.smtp.timeoutMs,
        greetingTimeout: deps.smtp.timeoutMs,
        socketTimeout: deps.smtp.timeoutMs,
      });
      const conn: Conn = {
        leaseId,
        smtp,
        sent: 0,
        busy: true,
        closing: false,
        leaseUntil: Date.now() + ttlMs,
        ended: new Promise((r) => smtp.once('end', r)),
        host,
        counted: new Set(),
      };
      smtp.on('error', () => undefined); // each failure reaches the callback of what was under way
      try {
        await connectOnce(smtp);
        // Judged after EHLO and STARTTLS, before any credentials or MAIL FROM: required TLS that is not
        // verified ends the session here, so nothing goes in clear or to a certificate that is not the host's.
        conn.session = sessionOf(smtp, host);
        if (route.require && !fits(conn, route.require)) {
          deps.smtp.tls?.record(site.domain, conn.session);
          refused.push(whyUnverified(conn.session));
          smtp.quit();
          await conn.ended;
          continue;
        }
        if (route.auth) await loginOnce(smtp, route.auth);
      } catch (err) {
        smtp.close();
        await conn.ended;
        last = err as SmtpFailure;
        if (isTlsFailure(err) && route.require) refused.push(`TLS handshake with ${host} failed`);
        if (isTlsFailure(err))
          deps.smtp.tls?.record(site.domain, {
            mxHost: host,
            receivingIp: address,
            sendingIp: '',
            result: 'validation-failure',
          });
        // A reply (421 at the greeting, say) is the site's answer: judged before the slot is given back, not tried on the next host.
        if (last.responseCode) {
          await judge(last.response ?? last.message).catch(() => undefined);
          break;
        }
        continue;
      }
      current = conn;
      // The connection counts against the site here until its lease is gone from the store too, so no
      // other lane asks for a slot the store still sees taken.
      void conn.ended.then(async () => {
        conn.closing = true;
        stopKeeping();
        clearTimeout(conn.idle);
        await deps.store.releaseLease(leaseId).catch(() => undefined);
        e.conns = e.conns.filter((x) => x !== conn);
        wake(e);
      });
      e.conns.push(conn);
      return conn;
    }
    if (unusable === hosts.length && hosts.length === 1) last.permanent = last.permanent ?? true;
    stopKeeping();
    await deps.store.releaseLease(leaseId).catch(() => undefined);
    if (refused.length && route.require)
      last = Object.assign(new Error(`${route.require.why}: ${refused.join('; ')}`), { tlsRequired: true });
    last.connect = true;
    return { err: last };
  }

  /** A connection of this site for one transaction (marked busy), or why there is none now. */
  async function take(
    site: Site,
    limits: Limits,
    judge: Judge,
    route: Route,
  ): Promise<Conn | { err: SmtpFailure } | Throttled> {
    const e = entryOf(site.key);
    for (;;) {
      const idle = e.conns.find((c) => !c.busy && !c.closing && fits(c, route.require));
      if (idle) {
        idle.busy = true;
        clearTimeout(idle.idle);
        return idle;
      }
      // Idle connections that cannot carry this mail (not verified) hold every slot: one closes to make room.
      const unfit = e.conns.find((c) => !c.busy && !c.closing);
      if (unfit && e.conns.length + e.opening >= limits.connectionLimit) retire(e, unfit, true);
      // A closing connection still holds its lease until its socket ends: counted, so a connection
      // rolling over (max_deliveries_per_connection) makes the next message wait here for its slot
      // rather than ask the store, be refused, and wait a second on a timer.
      const held = e.conns.length + e.opening;
      if (held < limits.connectionLimit) {
        // Counted as opening from the request for a lease until the connection is in `conns` (or the
        // lease was refused or given back), so no other lane asks for the same slot meanwhile.
        e.opening += 1;
        let granted: Awaited<ReturnType<ShapingStore['acquireLease']>> | undefined;
        try {
          granted = await deps.store.acquireLease(site.key, {
            holder: deps.holder,
            limit: limits.connectionLimit,
            rate: limits.maxConnectionRate?.perSecond ?? null,
            burst: limits.maxConnectionRate?.burst ?? 1,
            ttlMs,
          });
          if ('id' in granted) return await open(site, e, granted.id, judge, route);
        } finally {
          // Lanes waiting behind this opening look again (it may have been refused).
          e.opening -= 1;
          wake(e);
        }
        if (held === 0) return { throttled: true, waitMs: granted.waitMs, cause: granted.why };
      } else if (held === 0) {
        return { throttled: true, waitMs: 1000, cause: `connection_limit ${limits.connectionLimit} reached` };
      }
      // Our own connections to this site are all busy: the next one free is a transaction away.
      await new Promise<void>((resolve) => e.waiters.push(resolve));
    }
  }

  return {
    /**
     * One transaction to the site. `judge` sees any refusal (its text) before the connection or its slot
     * is given back, so a suspension it records is in force before anything else can connect.
     */
    async send(
      site: Site,
      limits: Limits,
      envelope: { from: string; to: string[] },
      raw: Buffer,
      judge: Judge,
      route: Route = {},
    ): Promise<PoolResult> {
      for (;;) {
        const conn = await take(site, limits, judge, route);
        if (!('smtp' in conn)) return conn;
        const e = entryOf(site.key);
        if (conn.leaseUntil - Date.now() < ttlMs / 2) {
          const kept = await deps.store.renewLease(conn.leaseId, Date.now() + ttlMs).catch(() => true);
          if (!kept) {
            conn.busy = false;
            retire(e, conn, true);
            continue;
          }
          conn.leaseUntil = Date.now() + ttlMs;
        }
        countSession(conn, envelope.to[0]);
        const outcome = await sendOnce(conn.smtp, envelope, raw);
        const refusal =
          'err' in outcome
            ? (outcome.err.response ?? (outcome.err.responseCode ? outcome.err.message : undefined))
            : refusalOf(outcome.info);
        if (refusal) await judge(refusal).catch(() => undefined);
        conn.sent += 1;
        conn.busy = false;
        const failed = 'err' in outcome ? outcome.err : undefined;
        if (failed) {
          // A refusal of this message leaves the session usable (RSET); anything else ends the connection.
          const reusable =
            (failed.code === 'EENVELOPE' || failed.code === 'EMESSAGE') && failed.responseCode !== 421 && !conn.closing;
          if (reusable) {
            conn.busy = true;
            conn.smtp.reset((err) => {
              conn.busy = false;
              if (err) retire(e, conn, false);
              else release(e, conn, limits);
            });
          } else retire(e, conn, false);
        } else release(e, conn, limits);
        return { ...outcome, session: conn.session };
      }
    },

    /** Closes the site's connections (a suspension): idle ones now, busy ones after their transaction. */
    drain(key: string): void {
      const e = bySite.get(key);
      if (e) for (const c of e.conns) retire(e, c, true);
    },

    /** Open connections of this process per site (diagnostics and tests). */
    openCount: (key: string) => bySite.get(key)?.conns.length ?? 0,

    async close(): Promise<void> {
      const all = [...bySite.values()].flatMap((e) => e.conns.map((c) => ({ e, c })));
      for (const { e, c } of all) retire(e, c, false);
      await Promise.all(all.map(({ c }) => Promise.race([c.ended, new Promise((r) => setTimeout(r, 2000).unref())])));
    },
  };

  /** Counts the connection's TLS outcome for the recipient domain the first time it carries its mail. */
  function countSession(c: Conn, rcpt: string | undefined): void {
    const domain = rcpt?.slice(rcpt.lastIndexOf('@') + 1).toLowerCase();
    if (!deps.smtp.tls || !c.session || !domain || c.counted.has(domain)) return;
    c.counted.add(domain);
    deps.smtp.tls.record(domain, c.session);
  }

  /** After a transaction: closes at max_deliveries_per_connection or when asked to, else idles. */
  function release(e: SiteConns, c: Conn, limits: Limits): void {
    if (c.closing || c.sent >= limits.maxDeliveriesPerConnection) retire(e, c, true);
    else {
      c.idle = setTimeout(() => retire(e, c, true), idleMs);
      c.idle.unref();
    }
    wake(e);
  }
}
export type ConnectionPool = ReturnType<typeof createConnectionPool>;
/** Runs a remote refusal through the site's automation rules. */
export type Judge = (answer: string) => Promise<unknown>;

/** The text of a refused recipient in an otherwise accepted transaction. */
function refusalOf(info: SMTPConnection.SentMessageInfo): string | undefined {
  const rejected = (info as { rejectedErrors?: { response?: string; message?: string }[] }).rejectedErrors;
  return rejected?.[0] ? (rejected[0].response ?? rejected[0].message) : undefined;
}

function connectOnce(smtp: SMTPConnection): Promise<void> {
  return new Promise((resolve, reject) => {
    let done = false;
    const finish = (err?: Error) => {
      if (done) return;
      done = true;
      if (err) reject(err);
      else resolve();
    };
    smtp.once('error', (err) => finish(err));
    smtp.once('end', () => finish(new Error('Connection closed before the greeting')));
    smtp.connect((err?: Error | null) => finish(err ?? undefined));
  });
}

function loginOnce(smtp: SMTPConnection, auth: { user: string; pass: string }): Promise<void> {
  return new Promise((resolve, reject) =>
    smtp.login({ credentials: { user: auth.user, pass: auth.pass } }, (err) => (err ? reject(err) : resolve())),
  );
}

function sendOnce(
  smtp: SMTPConnection,
  envelope: { from: string; to: string[] },
  raw: Buffer,
): Promise<{ info: SMTPConnection.SentMessageInfo } | { err: SmtpFailure }> {
  return new Promise((resolve) =>
    smtp.send(envelope, raw, (err, info) => resolve(err ? { err: err as SmtpFailure } : { info })),
  );
}
