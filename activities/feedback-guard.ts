import type { GuardService } from '../core/feedback/guard.js';
import type { Since } from '../core/feedback/rates.js';

/** The complaint guard's steps (local activities of `domain-guard-<id>`). */
export function feedbackGuardActivities(deps: { feedbackGuard: GuardService }) {
  return {
    /** Judges the domain's rates; pauses its bulk mail when one is too high (once: a paused domain is left as it is). */
    evaluateDomainGuard: (input: { domainId: string; since: Since | null }) => deps.feedbackGuard.evaluate(input),
    /** The resume point: now and this hour's counts so far (read only). */
    domainGuardBaseline: (input: { domainId: string }) => deps.feedbackGuard.baseline(input),
  };
}
