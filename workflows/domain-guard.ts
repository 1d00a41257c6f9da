import {
  condition,
  continueAsNew,
  defineSignal,
  proxyLocalActivities,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import type { Since } from '../core/feedback/rates.js';
import { UNLIMITED_RETRY } from './activity-options.js';

// An evaluation is one grouped read of activity_counters (and at most one write): a local activity.
const { evaluateDomainGuard, domainGuardBaseline } = proxyLocalActivities<Activities>({
  startToCloseTimeout: '1 minute',
  retry: UNLIMITED_RETRY,
});

/** Complaints or bounces were recorded for the domain (batched by the sender: one per domain per second). */
export const feedbackSignal = defineSignal('feedbackSignal');
/** The owner or an operator resumed the domain's bulk mail: judge only what is counted from now on. */
export const resumeSendingSignal = defineSignal('resumeSendingSignal');

export type DomainGuardInput = { domainId: string; since?: Since | null };

/** Signals handled per run before continue-as-new, so a domain with steady complaints keeps a small history. */
const SIGNALS_PER_RUN = 500;
const HOUR_MS = 3_600_000;
/** With no complaint or bounce for this long (and no resume point to keep), the guard ends; the next one starts it. */
const QUIET_MS = 24 * HOUR_MS;

/**
 * The complaint guard of one sending domain (`domain-guard-<dom id>`): judges the domain's complaint and
 * hard-bounce rates when signalled and hourly while there is recent activity; a pause (written by the
 * evaluation, idempotent) holds it until `resumeSendingSignal`, after which only what is counted from
 * the resume on is judged, for as long as the longest window reaches back to it.
 */
export async function domainGuardWorkflow(input: DomainGuardInput) {
  let signals = 0;
  let pending = false;
  let resumed = false;
  let since = input.since ?? null;
  let lastSignalAt = Date.now();
  setHandler(feedbackSignal, () => {
    signals += 1;
    pending = true;
  });
  setHandler(resumeSendingSignal, () => void (resumed = true));
  for (;;) {
    if (signals >= SIGNALS_PER_RUN || workflowInfo().continueAsNewSuggested)
      await continueAsNew<typeof domainGuardWorkflow>({ domainId: input.domainId, since });
    if (resumed) {
      resumed = false;
      since = await domainGuardBaseline({ domainId: input.domainId });
    }
    pending = false;
    const v = await evaluateDomainGuard({ domainId: input.domainId, since });
    if (v.gone) return { domainId: input.domainId, outcome: 'domain_gone' };
    since = v.since;
    if (v.paused) {
      // Until the resume; new complaints and the hour look again (a resume whose signal came before its write).
      await condition(() => resumed || pending, HOUR_MS);
      continue;
    }
    if (await condition(() => pending || resumed, HOUR_MS)) {
      if (pending) lastSignalAt = Date.now();
      continue;
    }
    if (Date.now() - lastSignalAt >= QUIET_MS && !since) return { domainId: input.domainId, outcome: 'quiet' };
  }
}
