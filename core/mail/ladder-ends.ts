/**
 * Whether a webhook delivery's ladder ends after an attempt: it succeeded, no attempt is left, or no
 * attempt could ever succeed (the payload is gone, the delivery is gone). Shared by the workflow ladder
 * and the inbound batch's first attempts, so both stop at the same point. Pure: runs in workflow code.
 */
export function ladderEnds(r: { ok: boolean; reason: string | null }, nextDelayMs: number | null): boolean {
  return r.ok || nextDelayMs === null || r.reason === 'no_payload' || r.reason === 'not_found';
}
