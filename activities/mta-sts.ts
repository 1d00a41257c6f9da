import type { MtaStsService } from '../core/mta-sts/service.js';

/** MTA-STS policies of recipient domains (docs/mta-sts.md). */
export function mtaStsActivities(deps: { mtaSts: Pick<MtaStsService, 'refresh'> }) {
  return {
    /** Reads `_mta-sts.<domain>`, fetches the policy for a new id and records the outcome in `mta_sts_policies`; idempotent. */
    refreshMtaStsPolicy: (input: { domain: string }) => deps.mtaSts.refresh(input.domain),
  };
}
