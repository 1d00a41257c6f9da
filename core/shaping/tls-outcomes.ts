import type { TLSSocket } from 'node:tls';
import { sql } from 'drizzle-orm';
import type SMTPConnection from 'nodemailer/lib/smtp-connection';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { log } from '../log.js';
import { tlsSessions } from '../metrics.js';

/** What an outbound SMTP session came to, in RFC 8460's words (§4.3 result types, plus `success`). */
export const TLS_RESULTS = [
  'success',
  'starttls-not-supported',
  'certificate-host-mismatch',
  'certificate-expired',
  'certificate-not-trusted',
  'validation-failure',
] as const;
export type TlsResult = (typeof TLS_RESULTS)[number];

/** One outbound session as a TLS report counts it. */
export type TlsSession = { mxHost: string; receivingIp: string; sendingIp: string; result: TlsResult };

/** Records the TLS outcome of outbound sessions per policy domain (the recipient's domain). */
export type TlsOutcomeRecorder = {
  record(policyDomain: string, session: TlsSession): void;
  /** Writes what is counted so far (one multi-row upsert); also runs every few seconds and on close. */
  flush(): Promise<void>;
  close(): Promise<void>;
};

/** Node's certificate verification codes (tls authorizationError) mapped to RFC 8460 result types. */
const EXPIRED = new Set(['CERT_HAS_EXPIRED', 'CERT_NOT_YET_VALID']);
const UNTRUSTED = new Set([
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'CERT_UNTRUSTED',
  'CERT_REJECTED',
  'CERT_REVOKED',
]);
export function resultOfAuthorization(error: string | Error | undefined | null): TlsResult {
  const code = typeof error === 'string' ? error : ((error as { code?: string } | null | undefined)?.code ?? '');
  if (!error) return 'success';
  if (code === 'ERR_TLS_CERT_ALTNAME_INVALID') return 'certificate-host-mismatch';
  if (EXPIRED.has(code)) return 'certificate-expired';
  if (UNTRUSTED.has(code)) return 'certificate-not-trusted';
  return 'validation-failure';
}

/**
 * The TLS outcome of a connected nodemailer SMTPConnection. After its 'connect' (greeting, EHLO and any
 * STARTTLS done) `secure` says whether the session is encrypted and `_socket` is then the TLSSocket,
 * whose `authorized`/`authorizationError` Node sets even with rejectUnauthorized false. nodemailer has
 * no public accessor for the socket; without one the session is judged on `secure` alone.
 */
export function sessionOf(smtp: SMTPConnection, mxHost: string): TlsSession {
  const socket = (smtp as unknown as { _socket?: TLSSocket })._socket;
  const secure = (smtp as unknown as { secure?: boolean }).secure === true;
  const base = { mxHost, receivingIp: socket?.remoteAddress ?? '', sendingIp: socket?.localAddress ?? '' };
  if (!secure) return { ...base, result: 'starttls-not-supported' };
  const authorized = socket?.authorized ?? true;
  return { ...base, result: authorized ? 'success' : resultOfAuthorization(socket?.authorizationError ?? 'unknown') };
}

/** A connection that failed in its STARTTLS handshake (nodemailer's ETLS): counted as validation-failure. */
export const isTlsFailure = (err: unknown) => (err as { code?: string } | null)?.code === 'ETLS';

/** The start (ms) of the report period `at` falls in. */
export const periodOf = (at: number, periodMs: number) => Math.floor(at / periodMs) * periodMs;

/**
 * Counts sessions in memory per (domain, period, MX host, receiving IP, result) and writes them with one
 * multi-row upsert every `flushMs` and on close: no SQL per message or session. A crash loses at most
 * the last `flushMs` of counts (docs/tls-reporting.md).
 */
export function createTlsOutcomeRecorder(deps: { db: Db; periodMs: number; flushMs?: number }): TlsOutcomeRecorder {
  type Row = typeof schema.tlsOutcomes.$inferInsert & { count: number };
  let pending = new Map<string, Row>();
  let writing: Promise<void> = Promise.resolve();
  const t = schema.tlsOutcomes;

  async function write(rows: Row[]): Promise<void> {
    if (!rows.length) return;
    await deps.db
      .insert(t)
      .values(rows)
      .onConflictDoUpdate({
        target: [t.policyDomain, t.periodStart, t.mxHost, t.receivingIp, t.result],
        set: { count: sql`${t.count} + excluded.count`, sendingIp: sql`excluded.sending_ip` },
      });
  }
  function flush(): Promise<void> {
    const rows = [...pending.values()];
    pending = new Map();
    // One write at a time, in order; a failed write puts its counts back for the next flush.
    writing = writing.then(() =>
      write(rows).catch((err: Error) => {
        log.warn({ error: err.message }, '[tls-report] could not record TLS outcomes; kept for the next flush');
        for (const r of rows) add(r);
      }),
    );
    return writing;
  }
  function add(r: Row): void {
    const key = [r.policyDomain, r.periodStart, r.mxHost, r.receivingIp, r.result].join('\n');
    const hit = pending.get(key);
    if (hit) hit.count += r.count;
    else pending.set(key, { ...r });
  }
  const timer = setInterval(() => void flush(), deps.flushMs ?? 5_000);
  timer.unref();
  return {
    record(policyDomain, s) {
      tlsSessions.inc({ result: s.result });
      add({
        policyDomain: policyDomain.toLowerCase(),
        periodStart: periodOf(Date.now(), deps.periodMs),
        mxHost: s.mxHost.toLowerCase().replace(/\.$/, ''),
        receivingIp: s.receivingIp,
        sendingIp: s.sendingIp,
        policyType: 'no-policy-found',
        result: s.result,
        count: 1,
      });
    },
    flush,
    async close() {
      clearInterval(timer);
      await flush();
    },
  };
}
