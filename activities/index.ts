import type { DomainService } from '../core/domains/service.js';
import type { OutboundTransport } from '../core/outbound/transport.js';
import type { Db } from '../db/index.js';
import { domainActivities } from './domains.js';
import { outboundActivities } from './outbound.js';

export type ActivityDeps = { db: Db; transport: OutboundTransport; serviceDomain: string; domains: DomainService };

/** Every activity the worker registers, built from its real dependencies (the composition root passes them). */
export function createActivities(deps: ActivityDeps) {
  return {
    ...outboundActivities(deps),
    ...domainActivities(deps),
  };
}
export type Activities = ReturnType<typeof createActivities>;
