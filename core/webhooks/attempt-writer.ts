import { sql } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { newId } from '../ids.js';
import { createGroupCommit } from '../group-commit.js';
import type { ControlRecord } from './control.js';
import type { AttemptCapture } from './post.js';

/** Attempt `n` of a delivery, posted: its capture, the URL it went to, and when the next attempt is due. */
export type AttemptRecord = {
  deliveryId: string;
  messageId: string;
  n: number;
  c: AttemptCapture;
  url: string;
  /** Delay before the next attempt after a failure; null when this was the last one. */
  nextDelayMs: number | null;
  control?: ControlRecord | null;
};
/** The delivery's domain webhook health, read back by the statement that moved the delivery on. */
export type Recorded = { health: unknown } | undefined;
const MAX_PER_FLUSH = 100;
const rowsOf = <T>(res: unknown): T[] => (res as { rows?: T[] }).rows ?? (res as T[]);

/**
 * Records webhook attempts with group commit: an attempt goes out at once when no write is under way;
 * attempts that complete while one is under way share the next statement (their att_ rows inserted and
 * their deliveries moved on, together). A caller's promise resolves once its attempt is durable, so the
 * outcome of a POST is still recorded before the delivery moves on. Each record is safe to write twice
 * (the att_ row is unique per delivery and attempt; the delivery update sets the same values).
 * A group that fails on a bad row is written again one attempt at a time, so the bad row fails only its
 * caller; a lost connection fails the whole group, and each caller tries again (nothing was written).
 */
export function createAttemptWriter(deps: { db: Db; onFlush?: (size: number) => void }) {
  const { db } = deps;

  async function writeAll(batch: AttemptRecord[]): Promise<Map<string, { health: unknown }>> {
    deps.onFlush?.(batch.length);
    const now = Date.now();
    const col = <T>(f: (r: AttemptRecord) => T) => sql.param(batch.map(f));
    const retry = (r: AttemptRecord) => !r.c.ok && r.nextDelayMs !== null;
    const statement = sql`with v as (
        select * from unnest(
          ${col(() => newId('att'))}::text[], ${col((r) => r.deliveryId)}::text[], ${col((r) => r.messageId)}::text[],
          ${col((r) => r.n)}::int[], ${col((r) => (r.c.ok ? 1 : 0))}::int[], ${col((r) => r.c.reason)}::text[],
          ${col((r) => r.c.requestHeaders)}::text[], ${col((r) => r.c.requestBody)}::text[], ${col((r) => r.c.status)}::int[],
          ${col((r) => r.c.responseHeaders)}::text[], ${col((r) => r.c.responseBody)}::text[], ${col((r) => r.c.durationMs)}::int[],
          ${col((r) => (r.control ? JSON.stringify(r.control) : null))}::jsonb[], ${col((r) => r.c.requestedAt)}::bigint[],
          ${col((r) => r.url)}::text[], ${col((r) => (r.c.ok ? 'delivered' : retry(r) ? 'pending' : 'failed'))}::text[],
          ${col((r) => (retry(r) ? now + r.nextDelayMs! : null))}::bigint[], ${col((r) => (retry(r) ? r.n : Math.max(0, r.n - 1)))}::int[]
        ) as v(id, delivery_id, message_id, n, ok, reason, request_headers, request_body, response_status,
          response_headers, response_body, duration_ms, control, requested_at, url, status, next_retry_at, retry_attempts)
      ), attempt as (
        insert into ${schema.deliveryAttempts} (id, delivery_id, message_id, attempt_number, ok, reason, request_headers,
          request_body, response_status, response_headers, response_body, duration_ms, control, requested_at, created_at)
        select id, delivery_id, message_id, n, ok, reason, request_headers, request_body, response_status,
          response_headers, response_body, duration_ms, control, requested_at, ${now}::bigint from v
        on conflict do nothing
        returning id
      )
      update ${schema.deliveries} dl set
        status = v.status, attempts = v.n, last_status_code = v.response_status, last_reason = v.reason, url = v.url,
        next_retry_at = v.next_retry_at, retry_attempts = v.retry_attempts, updated_at = ${now}::bigint
      from v
      where dl.id = v.delivery_id
      returning dl.id, (select d.webhook_health from ${schema.domains} d where d.id = dl.domain_id) as health`;
    const rows = rowsOf<{ id: string; health: unknown }>(await db.execute(statement));
    return new Map(rows.map((r) => [r.id, { health: r.health }]));
  }

  return createGroupCommit<AttemptRecord, Recorded>({
    write: async (batch) => {
      const moved = await writeAll(batch);
      return (r) => moved.get(r.deliveryId);
    },
    // The next group: what waits, at most one attempt per delivery (a delivery's attempts stay in order).
    take(pending) {
      const picked: number[] = [];
      const seen = new Set<string>();
      for (let i = 0; i < pending.length && picked.length < MAX_PER_FLUSH; i++) {
        if (seen.has(pending[i]!.deliveryId)) continue;
        seen.add(pending[i]!.deliveryId);
        picked.push(i);
      }
      return picked;
    },
    alone: true,
  });
}
export type AttemptWriter = ReturnType<typeof createAttemptWriter>;
