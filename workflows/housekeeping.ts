import { proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import { UNLIMITED_RETRY } from './activity-options.js';

const acts = proxyActivities<Activities>({ startToCloseTimeout: '5 minutes', retry: UNLIMITED_RETRY });

/** Schedule: wakes the one dispatcher of every domain with engagement events left pending (a lost nudge), by signal-with-start. */
export async function sweepEngagementWorkflow() {
  const woken = await acts.wakeStrandedEngagement({ olderThanMs: 30_000 });
  return { domains: woken };
}

/** Schedule: deletes captured delivery attempts older than 45 days (SPEC.md retention). */
export async function pruneAttemptsWorkflow() {
  let deleted = 0;
  for (let i = 0; i < 100; i++) {
    const n = await acts.pruneDeliveryAttempts({ olderThanMs: 45 * 86_400_000, limit: 5000 });
    deleted += n;
    if (n < 5000) break;
  }
  return { deleted };
}

/** Schedule: deletes idempotency keys past their 24 hours (docs/idempotency.md); lookups already treat them as gone. */
export async function pruneIdempotencyKeysWorkflow() {
  let deleted = 0;
  for (let i = 0; i < 100; i++) {
    const n = await acts.pruneIdempotencyKeys({ limit: 5000 });
    deleted += n;
    if (n < 5000) break;
  }
  return { deleted };
}

/** Schedule: hands sequence outbox rows left behind (a crash between recording an event and signalling) to their enrolments. */
export async function sweepSequencesWorkflow(input: { olderThanMs?: number } = {}) {
  let handed = 0;
  for (let i = 0; i < 20; i++) {
    const n = await acts.sweepSequenceOutbox({ olderThanMs: input.olderThanMs ?? 30_000, limit: 500 });
    handed += n;
    if (n < 500) break;
  }
  return { handed };
}

/** Schedule: deletes held inbound mail past its QUARANTINE_DAYS (docs/inbound-policy.md, Quarantine). */
export async function sweepHeldInboundWorkflow() {
  let deleted = 0;
  for (let i = 0; i < 100; i++) {
    const n = await acts.sweepHeldInbound({ limit: 1000 });
    deleted += n;
    if (n < 1000) break;
  }
  return { deleted };
}
