import type { SearchAttributeType } from '@temporalio/common';
import proto from '@temporalio/proto';
import type { Database } from '../db/index.js';
import { ensureSearchAttributes, type TemporalHandle } from './client.js';
import { SEARCH_ATTRIBUTES } from './search-attributes.js';

/** Serializes registration when API, SMTP ingress and worker start together against one database. */
const SEARCH_ATTRIBUTE_LOCK = 7_301_502;
const DEFAULT_TIMEOUT_MS = 90_000;

const INDEXED_TYPE = (type: SearchAttributeType) =>
  proto.temporal.api.enums.v1.IndexedValueType[`INDEXED_VALUE_TYPE_${type}`];

/** A value of each type that no run carries, for a query that names every attribute. */
const PROBE_LITERAL: Record<SearchAttributeType, string> = {
  TEXT: "'svc-probe'",
  KEYWORD: "'svc-probe'",
  KEYWORD_LIST: "'svc-probe'",
  INT: '-1',
  DOUBLE: '-1',
  BOOL: 'false',
  DATETIME: "'1970-01-01T00:00:00Z'",
};

/** A visibility query naming every search attribute: it fails until the frontend resolves them all. */
export function probeQuery(attributes: Record<string, SearchAttributeType> = SEARCH_ATTRIBUTES): string {
  return Object.entries(attributes)
    .map(([name, type]) => `${name} = ${PROBE_LITERAL[type]}`)
    .join(' AND ');
}

/**
 * Makes the namespace ready for workflows that carry our search attributes, before a role serves.
 * On a full server with SQL visibility, AddSearchAttributes writes the namespace's alias mapping at once
 * (ListSearchAttributes reports it) but each service resolves names through a cached copy of the namespace
 * that refreshes on its own clock (about 10 s), and two processes adding at once can claim different
 * columns for one name. So: register under a database advisory lock (one role registers, the others
 * find the attributes listed), then wait until the frontend accepts a query naming every attribute.
 */
export async function prepareSearchAttributes(
  t: TemporalHandle,
  opts: {
    database: Pick<Database, 'withLock'>;
    log?: (m: string) => void;
    timeoutMs?: number;
    address?: string;
  },
): Promise<void> {
  const log = opts.log ?? (() => undefined);
  const started = Date.now();
  const deadline = started + (opts.timeoutMs ?? DEFAULT_TIMEOUT_MS);
  const where = `Temporal${opts.address ? ` at ${opts.address}` : ''} (namespace ${t.namespace})`;
  const names = Object.keys(SEARCH_ATTRIBUTES).join(', ');
  const added = await opts.database
    .withLock(SEARCH_ATTRIBUTE_LOCK, () => retryUntil(deadline, () => ensureSearchAttributes(t, log)))
    .catch((err: Error) => {
      throw new Error(`${where}: could not register the search attributes ${names}: ${err.message}`, { cause: err });
    });
  if (added.length > 0)
    log(
      `[temporal] registered search attributes ${added.join(', ')} in namespace ${t.namespace}; waiting until the server resolves them`,
    );
  const query = probeQuery();
  let lastError: unknown;
  for (;;) {
    try {
      const listed = await t.connection.operatorService.listSearchAttributes({ namespace: t.namespace });
      const missing = Object.keys(SEARCH_ATTRIBUTES).filter((name) => !(name in (listed.customAttributes ?? {})));
      if (missing.length > 0) throw new Error(`not listed: ${missing.join(', ')}`);
      const retyped = Object.keys(SEARCH_ATTRIBUTES).filter(
        (n) => listed.customAttributes![n] !== INDEXED_TYPE(SEARCH_ATTRIBUTES[n]!),
      );
      if (retyped.length > 0) throw new Error(`listed with another type: ${retyped.join(', ')}`);
      await t.connection.workflowService.listWorkflowExecutions({ namespace: t.namespace, pageSize: 1, query });
      if (added.length > 0) log(`[temporal] search attributes ready after ${Date.now() - started} ms`);
      return;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() > deadline) {
      throw new Error(
        `${where} does not resolve the search attributes ${names} after ${Math.round((Date.now() - started) / 1000)} s: ${(lastError as Error).message}`,
      );
    }
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** gRPC codes that retrying cannot fix: INVALID_ARGUMENT (e.g. no free column of a type), PERMISSION_DENIED. */
const PERMANENT_CODES = new Set([3, 7]);

/** Retries `fn` (a server still starting, a concurrent registration from another deployment) until `deadline`. */
async function retryUntil<T>(deadline: number, fn: () => Promise<T>): Promise<T> {
  for (;;) {
    try {
      return await fn();
    } catch (err) {
      if (PERMANENT_CODES.has((err as { code?: number }).code ?? -1) || Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 500));
    }
  }
}
