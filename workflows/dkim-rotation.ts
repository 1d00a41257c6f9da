import {
  condition,
  continueAsNew,
  defineSignal,
  proxyActivities,
  setHandler,
  sleep,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import { UNLIMITED_RETRY } from './activity-options.js';

const acts = proxyActivities<Activities>({ startToCloseTimeout: '1 minute', retry: UNLIMITED_RETRY });

/** Look for the new record now (sent by POST /api/domains/:id/verify). */
export const dkimCheckNowSignal = defineSignal('dkimCheckNowSignal');

export type DkimRotationInput = {
  domainId: string;
  /** The verification loop's schedule: first wait, longest wait, and how long a customer has to publish the record. */
  initialDelayMs: number;
  maxDelayMs: number;
  deadlineMs: number;
  /** How long the old selector stays published after signing moved off it (at least the signers' key cache). */
  graceMs: number;
  /** Set on continue-as-new so the deadline and backoff carry over. */
  startedAt?: number;
  delayMs?: number;
};

/**
 * One DKIM key rotation of one domain (`dkim-rotate-<domain id>`): a key under a new selector is created
 * and published (a hosted zone at once; a customer zone lists it in the domain's `dns` and the workflow
 * waits, on the verification loop's schedule or a nudge, until it resolves), signing switches to it, the old
 * selector stays published for the grace period, then it is retired. Every wait is a durable timer.
 */
export async function dkimRotationWorkflow(input: DkimRotationInput) {
  let nudged = false;
  setHandler(dkimCheckNowSignal, () => void (nudged = true));
  const started = await acts.beginDkimRotation({ domainId: input.domainId });
  if (started.state === 'gone') return { outcome: 'deleted' as const };
  const startedAt = input.startedAt ?? Date.now();
  let delay = input.delayMs ?? input.initialDelayMs;
  for (;;) {
    nudged = false;
    const published = await acts.dkimNextPublished({ domainId: input.domainId });
    if (published === 'gone') return { outcome: 'deleted' as const };
    if (published) break;
    const remaining = startedAt + input.deadlineMs - Date.now();
    if (remaining <= 0) {
      await acts.abandonDkimRotation({ domainId: input.domainId });
      return { outcome: 'timed_out' as const, selector: started.selector };
    }
    await condition(() => nudged, Math.min(delay, remaining));
    delay = Math.min(delay * 2, input.maxDelayMs);
    if (workflowInfo().continueAsNewSuggested)
      await continueAsNew<typeof dkimRotationWorkflow>({ ...input, startedAt, delayMs: delay });
  }
  const switched = await acts.switchDkimKey({ domainId: input.domainId });
  if (!switched) return { outcome: 'deleted' as const };
  await sleep(input.graceMs);
  await acts.retireDkimKey({ domainId: input.domainId });
  return { outcome: 'rotated' as const, selector: switched.selector };
}

/** Schedule (DKIM_ROTATION_DAYS): starts the rotation of every sending domain whose key is older than that. */
export async function scheduleDkimRotationsWorkflow(input: { olderThanMs: number }) {
  // One pass: a domain started now leaves the due list once its run has created the next key; the next pass takes the rest.
  const started = await acts.startDueDkimRotations({ olderThanMs: input.olderThanMs, limit: 500 });
  return { started };
}
