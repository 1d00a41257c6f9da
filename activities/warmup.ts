import type { WarmupService } from '../core/shaping/warmup.js';

/** Warm-up plan steps (idempotent: a day only moves forward; finishing twice is the same). */
export function warmupActivities(deps: { warmup: WarmupService }) {
  return {
    /** Day `day` of the plan begins now; false when the plan is gone (stopped). */
    advanceWarmup: (input: { domainId: string; day: number }) => deps.warmup.advance(input.domainId, input.day),
    finishWarmup: (input: { domainId: string }) => deps.warmup.finish(input.domainId),
  };
}
