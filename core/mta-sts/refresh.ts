import type { Resolver } from 'node:dns/promises';
import { isNoRecord } from '../dns.js';
import { fetchPolicyText, type PolicyFetchOptions } from './fetch.js';
import { parsePolicy } from './parse.js';
import { normalizeDomain, parseStsRecords, type StsRecord } from './record.js';
import { livePolicy, type PolicyRow, type PolicyStore } from './store.js';

/** What one refresh did: the row's new status, or `kept` when a cached policy stays in force. */
export type RefreshResult = {
  domain: string;
  status: 'ok' | 'absent' | 'failed' | 'kept';
  recordId: string | null;
  mode: string | null;
  error: string | null;
};

/** A reason kept on the row is cut here (a certificate error lists every name the certificate holds). */
const MAX_ERROR_CHARS = 500;

export type RefreshDeps = {
  store: PolicyStore;
  resolver: Resolver;
  fetch: PolicyFetchOptions;
  /** How long an absent or failed answer is kept before the domain is tried again. */
  retryMs: number;
};

/**
 * Reads the `_mta-sts` record and, for a new id, fetches and parses the policy, then records the outcome
 * (the activity of `mtaStsFetchWorkflow`). A failure to read (DNS, HTTPS, parsing) is recorded, never
 * thrown; a database error is thrown (the activity retries it). RFC 8461 §5.1: a live cached policy
 * stays in force when the record vanishes or the new policy cannot be read; the row then notes the error.
 * Idempotent: running again records the same outcome.
 */
export async function refreshPolicy(rawDomain: string, deps: RefreshDeps): Promise<RefreshResult> {
  const domain = normalizeDomain(rawDomain);
  if (!domain) return { domain: rawDomain, status: 'failed', recordId: null, mode: null, error: 'not a domain name' };
  const current = await deps.store.get(domain);
  const now = Date.now();
  let record: StsRecord | { dnsError: string };
  try {
    record = parseStsRecords(await deps.resolver.resolveTxt(`_mta-sts.${domain}`));
  } catch (err) {
    record = isNoRecord(err)
      ? { none: 'no _mta-sts record' }
      : { dnsError: `_mta-sts TXT lookup failed (${(err as NodeJS.ErrnoException).code ?? 'error'})` };
  }
  const kept = (row: PolicyRow, error: string | null): RefreshResult => ({
    domain,
    status: 'kept',
    recordId: row.recordId,
    mode: row.mode,
    error,
  });
  if ('none' in record) {
    if (livePolicy(current, now)) return kept(current, null);
    return write(deps, { domain, recordId: null, status: 'absent', error: record.none }, now);
  }
  const recordId = 'id' in record ? record.id : (current?.recordId ?? null);
  if ('id' in record && current?.recordId === record.id && livePolicy(current, now)) return kept(current, null);
  let failure: string;
  if ('dnsError' in record) failure = record.dnsError;
  else {
    try {
      const parsed = parsePolicy(await fetchPolicyText(domain, deps.fetch));
      if ('policy' in parsed) {
        const { mode, mx, maxAge } = parsed.policy;
        await deps.store.put({
          domain,
          recordId: record.id,
          status: 'ok',
          mode,
          mx,
          maxAge,
          error: null,
          fetchedAt: now,
          expiresAt: now + maxAge * 1000,
        });
        return { domain, status: 'ok', recordId: record.id, mode, error: null };
      }
      failure = `policy refused: ${parsed.error}`;
    } catch (err) {
      failure = (err as Error).message.slice(0, MAX_ERROR_CHARS);
    }
  }
  if (livePolicy(current, now)) {
    const error = `refresh${recordId ? ` for id ${recordId}` : ''} failed: ${failure}`;
    await deps.store.noteError(domain, error);
    return kept(current, error);
  }
  return write(deps, { domain, recordId, status: 'failed', error: failure }, now);
}

async function write(
  deps: RefreshDeps,
  r: { domain: string; recordId: string | null; status: 'absent' | 'failed'; error: string },
  now: number,
): Promise<RefreshResult> {
  await deps.store.put({ ...r, mode: null, mx: [], maxAge: null, fetchedAt: now, expiresAt: now + deps.retryMs });
  return { domain: r.domain, status: r.status, recordId: r.recordId, mode: null, error: r.error };
}
