import type { Resolver } from 'node:dns/promises';
import { gzipSync } from 'node:zlib';
import { and, asc, eq, lte, notExists } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { isNoRecord } from '../dns.js';
import { BOUNCE_LABEL } from '../domains/records.js';
import { AppError, isAppError } from '../errors.js';
import { tlsReportsSent } from '../metrics.js';
import { resolveAllowed } from '../net/address-guard.js';
import { requestPinned } from '../net/pinned-http.js';
import type { ServiceSigner } from '../domains/service-domain.js';
import { isThrottled, type OutboundTransport } from '../transport/transport.js';
import { checkWebhookUrl } from '../webhooks/url.js';
import type { TlsOutcomeRecorder } from '../shaping/tls-outcomes.js';
import { buildTlsReport, parseTlsRpt, reportMail, type TlsReportJson } from './tls-report.js';

export type TlsReportKey = { policyDomain: string; periodStart: number };
export type TlsReportStatus = 'sent' | 'no_rua' | 'failed';
export type TlsReportOutcome = TlsReportKey & { status: TlsReportStatus; destinations: string[]; error?: string };
/** What a run of the tls-reports workflow answers: each report it settled. */
export type { TlsReportsResult } from '../ports/operations.js';

/** Reports listed per workflow run at most; the rest wait for the next run (docs/tls-reporting.md). */
export const PENDING_LIMIT = 500;
const HTTP_TIMEOUT_MS = 30_000;

/**
 * The RFC 8460 reports the platform sends (docs/tls-reporting.md): which (policy domain, period) pairs
 * are owed one, and sending one to every `rua` the domain's `_smtp._tls` record names. The row in
 * tls_report_sends is written after delivery, so a crash mid-send sends again (harmless) rather than never.
 */
export function createTlsReportSender(deps: {
  db: Db;
  resolver: Resolver;
  serviceDomain: string;
  periodMs: number;
  allowPrivate: boolean;
  transport: OutboundTransport;
  signer: () => Promise<ServiceSigner>;
  /** This process's session counts, written before the pending reports are listed. */
  outcomes?: TlsOutcomeRecorder;
}) {
  const o = schema.tlsOutcomes;
  const s = schema.tlsReportSends;

  /** Pairs with sessions counted in a finished period (or the current one too) and no report yet. */
  async function pending(opts: { includeCurrent: boolean }): Promise<TlsReportKey[]> {
    await deps.outcomes?.flush();
    const sent = deps.db
      .select({ one: s.policyDomain })
      .from(s)
      .where(and(eq(s.policyDomain, o.policyDomain), eq(s.periodStart, o.periodStart)));
    const finished = opts.includeCurrent ? undefined : lte(o.periodStart, Date.now() - deps.periodMs);
    return deps.db
      .selectDistinct({ policyDomain: o.policyDomain, periodStart: o.periodStart })
      .from(o)
      .where(and(notExists(sent), finished))
      .orderBy(asc(o.periodStart), asc(o.policyDomain))
      .limit(PENDING_LIMIT);
  }

  /** The domain's `rua` URIs (empty: none published). A DNS failure other than "no record" is retried. */
  async function ruaOf(domain: string): Promise<string[]> {
    try {
      return parseTlsRpt(await deps.resolver.resolveTxt(`_smtp._tls.${domain}`));
    } catch (err) {
      if (isNoRecord(err)) return [];
      throw new AppError(503, 'dns_unavailable', `TXT lookup of _smtp._tls.${domain} failed`, true);
    }
  }

  async function mailTo(address: string, report: TlsReportJson, gz: Buffer): Promise<void> {
    const raw = await reportMail({
      serviceDomain: deps.serviceDomain,
      to: address,
      report,
      gz,
      key: await deps.signer(),
    });
    const id = `tlsrpt-${report['report-id']}`;
    // The return path is the service domain's bounce address, so a bounce is read as one (and matches no message).
    const out = await deps.transport.send(
      id,
      { from: `bounce+tlsrpt@${BOUNCE_LABEL}.${deps.serviceDomain}`, to: [address] },
      raw.raw,
      raw.subject,
    );
    if (isThrottled(out)) throw new AppError(503, 'throttled', `mail to ${address} waits: ${out.cause}`, true);
    const r = out[0];
    if (r?.status !== 'sent') throw new AppError(502, 'refused', r?.response ?? 'not sent', r?.status === 'deferred');
  }

  async function post(uri: string, gz: Buffer): Promise<void> {
    let url: URL;
    try {
      url = new URL(checkWebhookUrl(uri));
    } catch {
      throw new AppError(400, 'bad_rua', `${uri} is not an https address`);
    }
    const address = await resolveAllowed(url.hostname, {
      resolver: deps.resolver,
      allowPrivate: deps.allowPrivate,
      what: 'TLS report host',
    });
    const res = await requestPinned(url, address, {
      method: 'POST',
      headers: { 'content-type': 'application/tlsrpt+gzip' },
      body: gz,
      timeoutMs: HTTP_TIMEOUT_MS,
      maxResponseBytes: 4096,
    });
    if (res.status < 200 || res.status >= 300)
      throw new AppError(502, 'refused', `${url.host} answered HTTP ${res.status}`, res.status >= 500);
  }

  /** Records the outcome (the first one stands) and answers the one recorded. */
  async function record(outcome: TlsReportOutcome, reportId: string): Promise<TlsReportOutcome> {
    const [row] = await deps.db
      .insert(s)
      .values({
        policyDomain: outcome.policyDomain,
        periodStart: outcome.periodStart,
        reportId,
        status: outcome.status,
        destinations: outcome.destinations,
        error: outcome.error ?? null,
        at: Date.now(),
      })
      .onConflictDoNothing()
      .returning();
    if (row) tlsReportsSent.inc({ status: outcome.status });
    return row ? outcome : ((await done(outcome)) ?? outcome);
  }

  async function done(key: TlsReportKey): Promise<TlsReportOutcome | undefined> {
    const [row] = await deps.db
      .select()
      .from(s)
      .where(and(eq(s.policyDomain, key.policyDomain), eq(s.periodStart, key.periodStart)));
    return (
      row && {
        policyDomain: row.policyDomain,
        periodStart: row.periodStart,
        status: row.status as TlsReportStatus,
        destinations: row.destinations ?? [],
        ...(row.error ? { error: row.error } : {}),
      }
    );
  }

  const reportIdOf = (key: TlsReportKey) =>
    `${new Date(key.periodStart).toISOString().replace('.000Z', 'Z')}_${key.policyDomain}@${deps.serviceDomain}`;

  /**
   * Builds and delivers one report to every `rua`; sent when one took it. When none did, throws (retryable
   * when some failure may pass); the workflow records `failed` once retries are spent. Idempotent: a
   * recorded report is answered as it stands.
   */
  async function send(key: TlsReportKey, beat: () => void = () => undefined): Promise<TlsReportOutcome> {
    const prior = await done(key);
    if (prior) return prior;
    const reportId = reportIdOf(key);
    const rua = await ruaOf(key.policyDomain);
    if (!rua.length) return record({ ...key, status: 'no_rua', destinations: [] }, reportId);
    const rows = await deps.db
      .select()
      .from(o)
      .where(and(eq(o.policyDomain, key.policyDomain), eq(o.periodStart, key.periodStart)));
    const report = buildTlsReport({
      ...key,
      reportId,
      serviceDomain: deps.serviceDomain,
      periodMs: deps.periodMs,
      rows,
    });
    const gz = gzipSync(JSON.stringify(report));
    const delivered: string[] = [];
    const errors: { uri: string; err: unknown }[] = [];
    for (const uri of rua) {
      beat();
      try {
        if (uri.toLowerCase().startsWith('mailto:')) await mailTo(decodeURIComponent(uri.slice(7)), report, gz);
        else await post(uri, gz);
        delivered.push(uri);
      } catch (err) {
        errors.push({ uri, err });
      }
    }
    if (!delivered.length) {
      const why = errors.map((e) => `${e.uri}: ${(e.err as Error).message}`).join('; ');
      const retryable = errors.some((e) => !isAppError(e.err) || e.err.retryable);
      throw new AppError(502, 'tls_report_undelivered', `no rua took the report (${why})`, retryable);
    }
    return record({ ...key, status: 'sent', destinations: delivered }, reportId);
  }

  /** Every delivery failed for good: recorded as `failed` with why, so the period is not tried again. */
  const fail = (key: TlsReportKey, error: string) =>
    record({ ...key, status: 'failed', destinations: [], error }, reportIdOf(key));

  return { pending, send, fail };
}
export type TlsReportSender = ReturnType<typeof createTlsReportSender>;
