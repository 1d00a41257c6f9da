import type { Resolver } from 'node:dns/promises';
import type { Config } from '../config.js';
import { badRequest, notFound } from '../errors.js';
import type { Db } from '../../db/index.js';
import type { MtaStsWorkflows } from '../ports/mta-sts.js';
import { createMtaStsLookup } from './lookup.js';
import { normalizeDomain } from './record.js';
import { refreshPolicy } from './refresh.js';
import { createPolicyStore } from './store.js';

/** What GET /api/operator/mta-sts/:domain answers: the domain's stored policy row. */
export type StoredPolicyView = {
  domain: string;
  record_id: string | null;
  status: 'ok' | 'absent' | 'failed';
  mode: 'enforce' | 'testing' | 'none' | null;
  mx: string[];
  max_age: number | null;
  fetched_at: string;
  expires_at: string;
  error: string | null;
};

/**
 * MTA-STS of recipient domains (docs/mta-sts.md): the lookup the worker's transport asks, the refresh
 * the fetch workflow's activity runs, and the operator's view and flush of a domain's stored policy.
 */
export function createMtaStsService(deps: {
  db: Db;
  resolver: Resolver;
  config: Pick<Config, 'mtaSts' | 'allowPrivateNetworks'>;
  workflows: MtaStsWorkflows;
}) {
  const store = createPolicyStore(deps.db);
  const { mtaSts } = deps.config;
  const domainOf = (raw: string) => {
    const domain = normalizeDomain(raw);
    if (!domain) throw badRequest(`${raw.slice(0, 64)} is not a domain name`, 'invalid_domain');
    return domain;
  };
  return {
    /** One per process (the worker's transport): its caches live as long as it does. `cacheMs` for tests. */
    lookup: (opts: { cacheMs?: number } = {}) =>
      createMtaStsLookup({
        store,
        resolver: deps.resolver,
        startFetch: (domain) => deps.workflows.startMtaStsFetch(domain),
        retryMs: mtaSts.retryMs,
        cacheMs: opts.cacheMs ?? mtaSts.cacheMs,
      }),
    /** The fetch workflow's work: TXT, policy, row (core/mta-sts/refresh.ts). */
    refresh: (domain: string) =>
      refreshPolicy(domain, {
        store,
        resolver: deps.resolver,
        retryMs: mtaSts.retryMs,
        fetch: {
          resolver: deps.resolver,
          allowPrivate: deps.config.allowPrivateNetworks,
          port: mtaSts.port,
          maxBytes: mtaSts.maxBytes,
          timeoutMs: mtaSts.timeoutMs,
        },
      }),
    async show(raw: string): Promise<StoredPolicyView> {
      const row = await store.get(domainOf(raw));
      if (!row) throw notFound(`No MTA-STS policy is stored for ${raw.slice(0, 64)}`);
      return {
        domain: row.domain,
        record_id: row.recordId,
        status: row.status,
        mode: row.mode,
        mx: row.mx,
        max_age: row.maxAge,
        fetched_at: new Date(row.fetchedAt).toISOString(),
        expires_at: new Date(row.expiresAt).toISOString(),
        error: row.error,
      };
    },
    /** Forgets the stored row: the next message to the domain fetches the policy again (workers within a minute). */
    flush: async (raw: string) => ({ flushed: await store.remove(domainOf(raw)) }),
  };
}
export type MtaStsService = ReturnType<typeof createMtaStsService>;
