import type { Database } from '../../db/index.js';

/**
 * Receiving config changed (a domain, its routes, its receiving settings): the per-process caches of the
 * inbound path (core/inbound/config-cache.ts) read again. Here, below every writer, so that domains,
 * webhooks and inbound can all say so. A change made in this process counts at once; one made in another
 * process arrives by PostgreSQL NOTIFY on `RECEIVING_CONFIG_CHANNEL` (migration 0027), on commit.
 */
let generation = 0;

/** The channel the domains and routes triggers notify on commit. */
export const RECEIVING_CONFIG_CHANNEL = 'receiving_config_changed';

/** Called by a writer after its change is committed: every cached entry read before it is stale. */
export function receivingConfigChanged(): void {
  generation++;
}

/** How many changes this process saw so far (an entry read at an older count is stale). */
export const configGeneration = (): number => generation;

/**
 * Hears other processes' changes: each notification, and each loss or return of the listening connection
 * (notifications may have been missed), counts as a change. Opened once per `listen`, by the first read.
 */
export function watchReceivingConfig(listen: Database['listen'] | undefined): () => void {
  let started = false;
  return () => {
    if (started || !listen) return;
    started = true;
    listen(RECEIVING_CONFIG_CHANNEL, { message: receivingConfigChanged, state: receivingConfigChanged });
  };
}
