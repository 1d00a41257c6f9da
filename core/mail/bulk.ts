/**
 * Bulk mail held by the complaint guard (docs/deliverability.md, The complaint guard): broadcast and
 * sequence copies carry their origin in `metadata` (broadcast_id, sequence_id), set by the service.
 */
export function isBulk(row: { kind: string; metadata?: Record<string, unknown> | null }): boolean {
  return row.kind === 'user' && Boolean(row.metadata?.broadcast_id ?? row.metadata?.sequence_id);
}

/**
 * How long held bulk mail waits before looking again: a quarter of how long the domain has been paused,
 * from 10 s to 5 min, so a short pause (a resume soon after) costs seconds and a long one few tries.
 */
export function bulkHoldMs(pausedAt: number, now = Date.now()): number {
  return Math.min(300_000, Math.max(10_000, Math.round((now - pausedAt) / 4)));
}
