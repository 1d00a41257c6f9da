import {
  condition,
  continueAsNew,
  defineSignal,
  proxyActivities,
  setHandler,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import { SvcDomainStatus } from './search-attributes.js';

const { checkDomainDns } = proxyActivities<Activities>({
  startToCloseTimeout: '1 minute',
  // DNS and database trouble is retried for as long as it lasts (capped at 5 minutes apart); the loop never ends on it.
  retry: { initialInterval: '5 seconds', backoffCoefficient: 2, maximumInterval: '5 minutes' },
});

/** Check again now (sent by POST /api/domains/:id/verify). */
export const checkNowSignal = defineSignal('checkNowSignal');

export type VerifyDomainInput = {
  domainId: string;
  domain: string;
  userId: string;
  initialDelayMs: number;
  maxDelayMs: number;
  deadlineMs: number;
  /** Set on continue-as-new so the deadline and backoff carry over. */
  startedAt?: number;
  delayMs?: number;
};

/**
 * The DNS verification loop of one domain: checks MX, SPF, DKIM and DMARC, waits with backoff
 * (about 1 minute growing to 1 hour), and ends once everything passes, the domain is deleted, or
 * the deadline (72 hours) passes. Survives worker restarts: the waits are durable timers.
 */
export async function verifyDomainWorkflow(input: VerifyDomainInput) {
  let nudged = false;
  setHandler(checkNowSignal, () => void (nudged = true));
  const startedAt = input.startedAt ?? Date.now();
  let delay = input.delayMs ?? input.initialDelayMs;
  for (;;) {
    nudged = false;
    const r = await checkDomainDns({ domainId: input.domainId });
    if (!r) return { outcome: 'deleted' as const };
    upsertSearchAttributes([{ key: SvcDomainStatus, value: r.status }]);
    if (r.allPassed) return { outcome: 'verified' as const, checks: r.checks };
    const remaining = startedAt + input.deadlineMs - Date.now();
    if (remaining <= 0) return { outcome: 'timed_out' as const, status: r.status, checks: r.checks };
    await condition(() => nudged, Math.min(delay, remaining));
    delay = Math.min(delay * 2, input.maxDelayMs);
    if (workflowInfo().continueAsNewSuggested)
      await continueAsNew<typeof verifyDomainWorkflow>({ ...input, startedAt, delayMs: delay });
  }
}
